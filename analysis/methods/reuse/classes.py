"""R-BPE's vocabulary classes (Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving BPE-Tokenizers with Token Reuse",
EMNLP 2025): Unicode-block labels under the `paper` or `unicode17` rules, the classification of a vocabulary, and
the choice of reusable classes for a target script (:class:`ReusePlan`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from analysis.core.cache import memoize
from analysis.core.unicode import block, blocks, normalize_name, scripts
from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

REPLACEMENT = "\ufffd"
#: Block-name families merged into one `X_merged` label.
MERGED_FAMILIES = ("Arabic", "CJK", "Greek", "Latin")
#: The class rule sets (see the module docstring): the paper's first release, or every Unicode 17 block and script.
RULES = ("paper", "unicode17")
DEFAULT_RULES = "paper"
#: Script keywords whose classes can never be reused (besides the preserved ones), `unicode17` rules.
NON_SCRIPTS = {"COMMON", "INHERITED", "BRAILLE", "UNKNOWN"}
#: `paper` rules: a class is eligible when its lower-cased name contains one of these.
PAPER_SCRIPT_KEYWORDS = ("cyrillic", "chinese", "korean", "japanese", "hebrew", "hindi", "hangul", "hiragana", "thai",
                         "tamil", "bengali", "armenian", "burmese", "georgian", "tibetan", "khmer", "malayalam",
                         "sinhala", "kannada", "telugu", "katakana", "myanmar", "cjk", "devanagari", "dingbats",
                         "greek")  # fmt: skip
#: `paper` rules: the blocks of the first release's table (Unicode 4.0 names; ranges as in analysis.core.unicode).
PAPER_BLOCKS = frozenset({
    "Basic Latin", "Latin-1 Supplement", "Latin Extended-A", "Latin Extended-B", "IPA Extensions",
    "Spacing Modifier Letters", "Combining Diacritical Marks", "Greek and Coptic", "Cyrillic", "Cyrillic Supplement",
    "Armenian", "Hebrew", "Arabic", "Syriac", "Thaana", "Devanagari", "Bengali", "Gurmukhi", "Gujarati", "Oriya",
    "Tamil", "Telugu", "Kannada", "Malayalam", "Sinhala", "Thai", "Lao", "Tibetan", "Myanmar", "Georgian",
    "Hangul Jamo", "Ethiopic", "Cherokee", "Unified Canadian Aboriginal Syllabics", "Ogham", "Runic", "Tagalog",
    "Hanunoo", "Buhid", "Tagbanwa", "Khmer", "Mongolian", "Limbu", "Tai Le", "Khmer Symbols", "Phonetic Extensions",
    "Latin Extended Additional", "Greek Extended", "General Punctuation", "Superscripts and Subscripts",
    "Currency Symbols", "Combining Diacritical Marks for Symbols", "Letterlike Symbols", "Number Forms", "Arrows",
    "Mathematical Operators", "Miscellaneous Technical", "Control Pictures", "Optical Character Recognition",
    "Enclosed Alphanumerics", "Box Drawing", "Block Elements", "Geometric Shapes", "Miscellaneous Symbols",
    "Dingbats", "Miscellaneous Mathematical Symbols-A", "Supplemental Arrows-A", "Braille Patterns",
    "Supplemental Arrows-B", "Miscellaneous Mathematical Symbols-B", "Supplemental Mathematical Operators",
    "Miscellaneous Symbols and Arrows", "CJK Radicals Supplement", "Kangxi Radicals",
    "Ideographic Description Characters", "CJK Symbols and Punctuation", "Hiragana", "Katakana", "Bopomofo",
    "Hangul Compatibility Jamo", "Kanbun", "Bopomofo Extended", "Katakana Phonetic Extensions",
    "Enclosed CJK Letters and Months", "CJK Compatibility", "CJK Unified Ideographs Extension A",
    "Yijing Hexagram Symbols", "CJK Unified Ideographs", "Yi Syllables", "Yi Radicals", "Hangul Syllables",
    "High Surrogates", "High Private Use Surrogates", "Low Surrogates", "Private Use Area",
    "CJK Compatibility Ideographs", "Alphabetic Presentation Forms", "Arabic Presentation Forms-A",
    "Variation Selectors", "Combining Half Marks", "CJK Compatibility Forms", "Small Form Variants",
    "Arabic Presentation Forms-B", "Halfwidth and Fullwidth Forms", "Specials", "Linear B Syllabary",
    "Linear B Ideograms", "Aegean Numbers", "Old Italic", "Gothic", "Ugaritic", "Deseret", "Shavian", "Osmanya",
    "Cypriot Syllabary", "Byzantine Musical Symbols", "Musical Symbols", "Tai Xuan Jing Symbols",
    "Mathematical Alphanumeric Symbols", "CJK Unified Ideographs Extension B",
    "CJK Compatibility Ideographs Supplement", "Tags",
})  # fmt: skip
UNKNOWN = "Unknown"
KANA = frozenset({"Hiragana", "Katakana"})
KATAKANA_HIRAGANA = "Katakana_Hiragana"
#: Preserving any of these preserves all East-Asian blocks (Han, kana, Hangul, Bopomofo).
CJK_ALIASES = {
    "cjk",
    "han",
    "chinese",
    "japanese",
    "korean",
    "hangul",
    "hiragana",
    "katakana",
    "bopomofo",
    "kana",
}
CJK_KEYWORDS = (
    "CJK",
    "BOPOMOFO",
    "HANGUL",
    "HIRAGANA",
    "KATAKANA",
    "KANA",
    "KANBUN",
    "KANGXI",
    "IDEOGRAPHIC",
)
#: FLORES languages tried (in order) for the "reused script now decodes as the target" demonstration.
DEMO_LANGS = (
    "rus_Cyrl",
    "kor_Hang",
    "hin_Deva",
    "tha_Thai",
    "heb_Hebr",
    "hye_Armn",
    "kat_Geor",
    "amh_Ethi",
    "zho_Hans",
    "jpn_Jpan",
    "ell_Grek",
)


# ---------------------------------------------------------------------------------------------- blocks
def _words(name: str) -> list[str]:
    return re.sub(r"[-_]", " ", name).split()


def block_label(block: str) -> str:
    """The class label of a block: Arabic/CJK/Greek/Latin blocks merge into `X_merged`, others keep their name."""
    words = _words(block)
    for fam in MERGED_FAMILIES:
        if fam in words:
            return f"{fam}_merged"
    return block


def check_rules(rules: str) -> str:
    """The rule-set name, or DataError for an unknown one."""
    if rules not in RULES:
        raise DataError(f"unknown class rules {rules!r}; choose one of {', '.join(RULES)}")
    return rules


def label_blocks(label: str) -> frozenset[str]:
    """Block names covered by one class label (none for ``Unknown``)."""
    names = [b.name for b in blocks()]
    if label.endswith("_merged"):
        return frozenset(n for n in names if block_label(n) == label)
    if label == KATAKANA_HIRAGANA:
        return frozenset(n for n in names if n.startswith(("Hiragana", "Katakana")))
    return frozenset({label}) if label in names else frozenset()


def _is_control(cp: int) -> bool:
    return cp < 0x20 or 0x7F < cp < 0xA0


@cache
def _paper_block_keys() -> frozenset[str]:
    return frozenset(normalize_name(n) for n in PAPER_BLOCKS)


@cache
def in_paper_table(block_name: str | None) -> bool:
    """Whether a block (an :mod:`analysis.core.unicode` name) is in the `paper` rules' table (names compared normalised:
    ``CJK Unified Ideographs Extension-A`` = ``… Extension A``)."""
    return block_name is not None and normalize_name(block_name) in _paper_block_keys()


@cache
def _char_label(ch: str, rules: str = DEFAULT_RULES) -> str | None:
    if ch == "\u2581":
        return None
    b = block(ch)
    if rules == "paper" and (not in_paper_table(b) or _is_control(ord(ch))):
        return UNKNOWN
    if b is None:
        return UNKNOWN
    if b == "General Punctuation":
        return None
    return block_label(b)


def text_labels(text: str, rules: str = DEFAULT_RULES) -> tuple[str, ...]:
    """Class labels of a string (sorted), by the class rule of the module docstring."""
    if text.isascii() and (rules != "paper" or text.isprintable()):
        return ("Latin_merged",) if text else ()
    labels = {lab for ch in text if (lab := _char_label(ch, rules)) is not None}
    if len(labels) > 1 and labels <= KANA | {"CJK_merged"}:
        labels.discard("CJK_merged")
        if labels == KANA:
            return (KATAKANA_HIRAGANA,)
    return tuple(sorted(labels))


def class_name(labels: Sequence[str]) -> str | None:
    """The class of a token with these labels: one label, labels joined with `_` (mixed), or None."""
    return "_".join(labels) if labels else None


# ------------------------------------------------------------------------------------- classification
@dataclass
class VocabClasses:
    """The vocabulary partitioned by Unicode-block class (step 1)."""

    classes: dict[str, list[int]]
    labels: dict[str, tuple[str, ...]]
    unclassified: list[int]
    special_ids: list[int]
    byte_ids: list[int]
    replacement_ids: list[int]
    rules: str = DEFAULT_RULES

    def counts(self) -> dict[str, int]:
        """Class → number of token ids, largest first (ties by name)."""
        return dict(sorted(((k, len(v)) for k, v in self.classes.items()), key=lambda kv: (-kv[1], kv[0])))


def standalone_text(tok: LoadedTokenizer, token: str) -> str:
    """What one vocabulary token decodes to on its own (partial UTF-8 → U+FFFD)."""
    return tok.token_bytes(token).decode("utf-8", errors="replace")


@memoize(maxsize=4)
def classify_vocab(tok: LoadedTokenizer, rules: str = DEFAULT_RULES) -> VocabClasses:
    """Classify every model-vocabulary id by the Unicode blocks of its standalone decoding (stripped); cached.

    `rules` is ``paper`` or ``unicode17`` (module docstring)."""
    return _classify(tok, check_rules(rules))


def _classify(tok: LoadedTokenizer, rules: str) -> VocabClasses:
    classes: dict[str, list[int]] = {}
    labels: dict[str, tuple[str, ...]] = {}
    unclassified: list[int] = []
    byte_ids: list[int] = []
    replacement: list[int] = []
    added = tok.added_ids
    for token, tid in sorted(tok.vocab.items(), key=lambda kv: kv[1]):
        if tid in added:
            continue
        raw = tok.token_bytes(token)
        if len(raw) == 1:
            byte_ids.append(tid)
        text = raw.decode("utf-8", errors="replace")
        if REPLACEMENT in text:
            replacement.append(tid)
        labs = text_labels(text.strip(), rules)
        name = class_name(labs)
        if name is None:
            unclassified.append(tid)
            continue
        classes.setdefault(name, []).append(tid)
        labels[name] = labs
    return VocabClasses(classes, labels, unclassified, sorted(added), byte_ids, replacement, rules)


# ------------------------------------------------------------------------------------------- choice
@cache
def script_names() -> tuple[str, ...]:
    """Unicode script names (normalised: upper case, letters only), minus Common/Inherited/Braille."""
    return tuple(sorted({normalize_name(n) for n in scripts()} - NON_SCRIPTS))


def _norm(s: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", s.upper())


def is_eligible(name: str, rules: str = DEFAULT_RULES) -> bool:
    """Whether a class may be reused: its name holds a script keyword (`paper`) or a Unicode script name except
    Common/Inherited/Braille, or CJK/Dingbats (`unicode17`)."""
    if rules == "paper":
        low = name.lower()
        return any(k in low for k in PAPER_SCRIPT_KEYWORDS)
    words = [_norm(w) for w in _words(name)]
    if "CJK" in words or "DINGBATS" in words:
        return True
    scripts = set(script_names())
    joins = {"".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    return bool(joins & scripts)


def script_blocks(script: str) -> frozenset[str]:
    """Block names that belong to a script named by the user (`arabic`, `latin`, `cjk`, `cyrillic` …)."""
    key = _norm(script)
    if not key:
        return frozenset()
    if script.strip().lower() in CJK_ALIASES:
        kws = CJK_KEYWORDS
    else:
        kws = (key,)
    return frozenset(b.name for b in blocks() if any(k in _norm(b.name) for k in kws))


def preserved_keywords(scripts: Iterable[str]) -> tuple[str, ...]:
    """`paper` rules: the lower-case names whose presence in a class name keeps the class (CJK → every East-Asian
    keyword)."""
    out: set[str] = set()
    for p in scripts:
        low = p.strip().lower()
        if low in CJK_ALIASES:
            out |= {k.lower() for k in CJK_KEYWORDS}
        elif low:
            out.add(low.replace("_", " "))
    return tuple(sorted(out))


@dataclass
class ReusePlan:
    """Which classes and ids are reused (step 2)."""

    target: str
    preserved: tuple[str, ...]
    min_reusable: int
    eligible: dict[str, int]
    selected: dict[str, int]
    preserved_classes: list[str]
    reusable_ids: list[int]
    reusable_blocks: list[str]
    target_blocks: list[str]
    #: ids of eligible classes kept out of reuse by a protection (shared symbols, used by kept languages)
    protected_ids: list[int] = field(default_factory=list)

    @property
    def reusable_count(self) -> int:
        """Number of reusable ids."""
        return len(self.reusable_ids)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "target": self.target,
            "preserved": list(self.preserved),
            "min_reusable": self.min_reusable,
            "selected_classes": self.selected,
            "n_selected_classes": len(self.selected),
            "n_eligible_classes": len(self.eligible),
            "reusable_count": self.reusable_count,
            "reusable_blocks": self.reusable_blocks,
            "target_blocks": self.target_blocks,
            "protected_count": len(self.protected_ids),
        }


def choose_reusable(
    vc: VocabClasses,
    target: str = "arabic",
    preserved: Sequence[str] = ("latin", "greek"),
    min_reusable: int = 20000,
    protected: Iterable[int] = (),
) -> ReusePlan:
    """Pick reusable classes: eligible, no block of a preserved script, smallest first until ≥ min_reusable ids.

    Ids in `protected` (see :func:`protected_ids`) are never reused; classes are counted without them."""
    target_blocks = script_blocks(target)
    if not target_blocks:
        raise DataError(f"unknown target script {target!r} (expected e.g. arabic, hebrew, cyrillic)")
    keep = set(target_blocks)
    pres = tuple(sorted({p.strip().lower() for p in preserved if p.strip()}))
    for p in pres:
        blocks = script_blocks(p)
        if not blocks:
            raise DataError(f"unknown preserved script {p!r}")
        keep |= blocks
    shielded = {int(i) for i in protected}
    protected = set(vc.special_ids) | set(vc.byte_ids) | shielded
    eligible: dict[str, int] = {}
    preserved_classes: list[str] = []
    keywords = preserved_keywords((target, *pres))
    for name in sorted(vc.classes):
        if not is_eligible(name, vc.rules):
            continue
        if vc.rules == "paper":
            kept = any(k in name.lower() for k in keywords)
        else:
            kept = bool(set().union(*(label_blocks(lab) for lab in vc.labels[name])) & keep)
        if kept:
            preserved_classes.append(name)
            continue
        n = sum(1 for i in vc.classes[name] if i not in protected)
        if n:
            eligible[name] = n
    selected: dict[str, int] = {}
    total = 0
    for name, n in sorted(eligible.items(), key=lambda kv: (kv[1], kv[0])):
        if total >= min_reusable:
            break
        selected[name] = n
        total += n
    ids = sorted(i for name in selected for i in vc.classes[name] if i not in protected)
    rblocks = sorted(set().union(*(label_blocks(lab) for name in selected for lab in vc.labels[name])) - keep)
    open_classes = [n for n in vc.classes if n not in preserved_classes and is_eligible(n, vc.rules)]
    in_eligible = {i for name in open_classes for i in vc.classes[name]}
    return ReusePlan(
        target, pres, min_reusable, eligible, selected, preserved_classes, ids, rblocks, sorted(target_blocks),
        sorted(shielded & in_eligible),
    )  # fmt: skip
