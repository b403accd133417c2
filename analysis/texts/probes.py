"""Small generated probe texts, the same on every run (a fixed seed, no clock): numbers and dates, whitespace runs
and tabs, emoji and ZWJ sequences. They cover what natural prose rarely holds and where tokenizers built from the
same vocabulary disagree most often (digit splitting, whitespace merging, multi-code-point graphemes)."""

from __future__ import annotations

import random
from collections.abc import Callable

#: The seed of every generated set: a fixed one, so two runs (and two tokenizers) see the same lines.
SEED = 20260

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip


def _digits(rng: random.Random, k: int) -> str:
    return str(rng.randrange(10 ** (k - 1) if k > 1 else 0, 10**k))


def numbers_and_dates(n: int = 400) -> list[str]:
    """`n` lines of numbers and dates: integers of 1–15 digits, grouped thousands, decimals, percentages,
    currency, negative and scientific numbers, ISO / US / European dates, times, phone and version numbers."""
    rng = random.Random(SEED)
    forms: list[Callable[[], str]] = [
        lambda: _digits(rng, rng.randint(1, 15)),
        lambda: f"{rng.randrange(1000, 10**12):,}",
        lambda: f"{rng.randrange(1000, 10**9):,}".replace(",", "."),
        lambda: f"{rng.uniform(0, 10**6):.{rng.randint(1, 6)}f}",
        lambda: f"{rng.uniform(0, 100):.1f}%",
        lambda: f"${rng.randrange(1, 10**7):,}.{rng.randrange(100):02d}",
        lambda: f"-{rng.randrange(1, 10**6)}",
        lambda: f"{rng.uniform(1, 10):.3f}e{rng.choice('+-')}{rng.randrange(1, 40):02d}",
        lambda: f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        lambda: f"{rng.randrange(1, 13)}/{rng.randrange(1, 29)}/{rng.randrange(1900, 2100)}",
        lambda: f"{rng.randrange(1, 29):02d}.{rng.randrange(1, 13):02d}.{rng.randrange(1900, 2100)}",
        lambda: f"{rng.randrange(1, 29)} {rng.choice(_MONTHS)} {rng.randrange(1900, 2100)}",
        lambda: f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}",
        lambda: (
            f"+{rng.randrange(1, 99)} {rng.randrange(100, 999)} {rng.randrange(1000, 9999)} {rng.randrange(100, 999)}"
        ),
        lambda: f"v{rng.randrange(10)}.{rng.randrange(30)}.{rng.randrange(100)}",
        lambda: (
            f"In {rng.randrange(1900, 2100)}, {rng.randrange(2, 999)} of {rng.randrange(1000, 99999)} "
            f"({rng.uniform(0, 100):.2f}%) were counted."
        ),
    ]
    return [forms[i % len(forms)]() for i in range(n)]


def whitespace_runs(n: int = 200) -> list[str]:
    """`n` lines with runs of spaces (1–64), tabs, mixed indentation, trailing spaces, CRLF and blank lines."""
    rng = random.Random(SEED + 1)
    words = ("return", "value", "if", "x", "the", "data", "for", "item", "in", "items", "end", "#")
    out: list[str] = []
    for i in range(n):
        kind = i % 6
        if kind == 0:
            out.append(" " * rng.randint(1, 64) + rng.choice(words))
        elif kind == 1:
            out.append("\t" * rng.randint(1, 8) + rng.choice(words) + "\t" + rng.choice(words))
        elif kind == 2:
            out.append(
                rng.choice(words) + " " * rng.randint(2, 40) + rng.choice(words) + " " * rng.randint(1, 9)
            )
        elif kind == 3:
            out.append(
                "".join(rng.choice((" ", "\t", "  ", "    ")) for _ in range(rng.randint(2, 12))) + "x = 1"
            )
        elif kind == 4:
            out.append(rng.choice(words) + "\r\n" + " " * rng.randint(0, 8) + rng.choice(words) + "\n\n\n")
        else:
            out.append(
                "\n".join("    " * rng.randint(0, 4) + rng.choice(words) for _ in range(rng.randint(2, 6)))
            )
    return out


_ZWJ = "\u200d"
_EMOJI = ("😀", "🎉", "🚀", "❤️", "👍", "🔥", "🌍", "🍕", "🐍", "✨", "🤖", "📈")
_SKIN = ("\U0001f3fb", "\U0001f3fc", "\U0001f3fd", "\U0001f3fe", "\U0001f3ff")
_PEOPLE = ("👨", "👩", "👧", "👦", "🧑")
_ZWJ_SEQUENCES = (
    "👨" + _ZWJ + "👩" + _ZWJ + "👧" + _ZWJ + "👦",  # family
    "👩" + _ZWJ + "💻",  # woman technologist
    "🏳️" + _ZWJ + "🌈",  # rainbow flag
    "🧑" + _ZWJ + "🚀",  # astronaut
    "👁️" + _ZWJ + "🗨️",  # eye in speech bubble
    "🐻" + _ZWJ + "❄️",  # polar bear
)
_FLAGS = ("🇪🇪", "🇯🇵", "🇧🇷", "🇺🇦", "🇮🇳", "🇳🇬")
_KEYCAPS = ("1️⃣", "#️⃣", "*️⃣")


def emoji_sequences(n: int = 200) -> list[str]:
    """`n` lines of emoji: single ones, skin-tone modifiers, ZWJ sequences, flags (regional-indicator pairs) and
    keycaps, alone, in runs and inside short text."""
    rng = random.Random(SEED + 2)
    out: list[str] = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            out.append("".join(rng.choice(_EMOJI) for _ in range(rng.randint(1, 6))))
        elif kind == 1:
            out.append(f"Thanks {rng.choice(_PEOPLE)}{rng.choice(_SKIN)} see you soon {rng.choice(_EMOJI)}")
        elif kind == 2:
            out.append(" ".join(rng.choice(_ZWJ_SEQUENCES) for _ in range(rng.randint(1, 4))))
        elif kind == 3:
            out.append(f"Flags: {''.join(rng.choice(_FLAGS) for _ in range(rng.randint(1, 5)))}")
        else:
            out.append(f"Press {rng.choice(_KEYCAPS)} then {rng.choice(_ZWJ_SEQUENCES)}{rng.choice(_SKIN)}")
    return out


#: Text that is hard for an encoder, whatever the tokenizer (a fast encoder's verification set,
#: :mod:`analysis.measure.fast_encode`): runs, scripts, marks, invisible and control
#: characters, normalizer bait, characters no vocabulary has (byte fallback), byte-like text.
ENCODER_HOSTILE = (
    "",
    " ",
    "a" * 5000,
    " " * 3000,
    "\n" * 400,
    "\t \t\n  \r\n" * 200,
    "0" * 2000,
    "1234567890" * 300,
    "ab" * 2500,
    "日本語" * 1200,
    "ก" * 2000,
    "สวัสดีครับ" * 300,
    "😀" * 600,
    "👨‍👩‍👧‍👦" * 200,
    "!!!???..." * 300,
    "-" * 4000,
    "=" * 1000 + "\n" + "#" * 1000,
    "Hello мир 世界 مرحبا नमस्ते สวัสดี 안녕하세요 Γειά σου שלום ሰላም ᓀᐦᐃᔭᐍᐏᐣ 🙂",
    "abcабвαβγ一二三ابج",
    "e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 \u1100\u1161\u11a8 Z\u0351\u0352\u0357\u035b",
    "zero\u200bwidth\u200cjoin\u200d\u2060word\ufeff \u00a0nbsp\u202fnarrow\u3000ideographic",
    "\u202eright-to-left override\u202c \u200fmark\u200e",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ﬁ ﬂ Ⅻ ² ㎏ ℌ ǅ ﹏ ｶﾀｶﾅ",
    "ÅÅ Å ﬃ Straße İstanbul ΣΑΣ ǈ ß ẞ",
    "UPPER lower MiXeD ÀÉÎÕÜ",
    "  leading and trailing spaces  ",
    "\x00\x01\x02\x07\x08\x0b\x0c\x1b\x7f \x85 \x9f",
    "\ufffd\ufffd \uffff \ufffe \U0010ffff \ue000\uf8ff \U000f0000",
    "Ã© Ã¨ â€™ â€œ Ã¼ Â\xa0",
    "\x80\x81\xa0\xad\xff þÿ",
    "<0x00> <0xFF> <0xE2><0x82><0xAC> ▁ ▁▁ Ġ Ċ ## ##s </w> <unk> [UNK]",
    "𠀀𠀁𠀂 𒀀𒀁 𐀀𐀁 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀𓀁 🀄 ꙮ",
    "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5 \U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "def f(x):\n\treturn x  # comment\n\n\nclass A:\n    pass\n",
    "http://example.com/a?b=c&d=e#f user@example.com 192.168.0.1 2026-12-06T00:00:00Z",
    "''' \"\"\" `` '' \"\" ‘’ “” «» „“ 「」",
)


#: Texts a round trip decode(encode(x)) == x is tested on: each (label, text) holds what normalizers, decoders and
#: byte-level maps are known to change (the issue list: NFC/NFD pairs, joiners, tabs and whitespace runs, lone
#: combining marks, unusual line breaks).
HOSTILE: tuple[tuple[str, str], ...] = (
    ("NFC é", "caf\u00e9 cr\u00e8me"),
    ("NFD é", "cafe\u0301 cre\u0300me"),
    ("NFD Hangul", "\u1112\u1161\u11ab\u1100\u1173\u11af"),  # 한글 as conjoining jamo
    ("NFD Vietnamese", "Vie\u0323\u0302t Nam"),
    ("ZWJ emoji", "👩\u200d💻 and 👨\u200d👩\u200d👧"),
    ("ZWNJ Persian", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
    ("zero-width space", "word\u200bword"),
    ("BOM inside", "a\ufeffb"),
    ("tabs", "\tindented\t\ttext\t"),
    ("long space run", "a" + " " * 200 + "b"),
    ("leading spaces", "     five leading"),
    ("trailing spaces", "three trailing   "),
    ("lone combining mark", "\u0301 starts with an accent"),
    ("combining after space", "a \u0308b"),
    ("stacked combining marks", "Z\u0351\u0348\u036b\u0315a\u0306\u0308lgo"),
    ("CR", "one\rtwo"),
    ("CRLF", "one\r\ntwo"),
    ("vertical tab / form feed", "one\x0btwo\x0cthree"),
    ("NEL", "one\x85two"),
    ("line / paragraph separator", "one\u2028two\u2029three"),
    ("no-break spaces", "100\u00a0km\u202fh"),
    ("ideographic space", "\u65e5\u672c\u3000\u8a9e"),
    ("fullwidth", "\uff21\uff22\uff23\uff11\uff12\uff13"),
    ("ligature", "\ufb01nance"),
    ("control character", "a\x07b"),
    ("private use", "\ue000\uf8ff"),
    ("astral plane", "\U0001d400\U0001d401 \U00020000"),
)


def pathological_inputs(
    size: int = 512 * 1024, flores_text: Callable[[str], str] | None = None
) -> dict[str, str]:
    """Inputs where an encoder's time may grow faster than linearly, about `size` UTF-8 bytes each: one character
    repeated, one space run, one digit run, and a run of Thai and of Chinese without spaces (from `flores_text`,
    a language code → its text, when given; else a repeated phrase)."""
    thai = (flores_text("tha_Thai") if flores_text else "") or "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ"
    zho = (flores_text("zho_Hans") if flores_text else "") or "中文句子之间没有空格分隔词语"
    out = {"one character": "a" * size, "spaces": " " * size, "digits": "7" * size}
    for label, text in (("Thai without spaces", thai), ("Chinese without spaces", zho)):
        run = "".join(text.split())
        n_chars = max(1, size // max(1, len(run.encode("utf-8")) // max(1, len(run))))
        out[label] = (run * (n_chars // max(1, len(run)) + 1))[:n_chars]
    return out
