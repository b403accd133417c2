"""The one source of Unicode scripts and blocks for every page and command.

Two committed tables, both generated from the `regex` module's public ``\\p{Script=…}`` and ``\\p{Block=…}``
properties (Unicode 17) by ``scripts/gen_unicode_tables.py``:

* ``assets/unicode_scripts.tsv`` — the Script property: :func:`script` of one character (``Latin``,
  ``Cyrillic``, ``Han``, ``Common``, ``Inherited``, ``Ol Chiki`` …; ``Unknown`` when unassigned);
* ``assets/unicode_blocks.tsv`` — the Block property: :func:`block` of one character (R-BPE classes).

Everything that names the script of a token is built on :func:`script`:

* :func:`text_script` — the label a token's text gets in the vocabulary views (Inspect, Token health,
  under-trained tokens): the script of its first letter-like character (compatibility forms such as fullwidth or
  mathematical letters count as the letter they stand for), else ``Digits`` / ``Whitespace`` / ``Empty`` /
  ``Punctuation/Symbols``;
* :func:`sentencepiece_script` — SentencePiece's rule on top: Hiragana, Katakana and the prolonged sound mark
  ``ー`` count as Han (continued training's "no piece crosses a script" rule);
* :func:`text_scripts` — the set of scripts of a string (pruning by script).

:func:`stable_letter_run` matches runs of letters whose category every Unicode version a tokenizer's regex engine
uses agrees on (the fast path of byte-level pre-token counting).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache

from .paths import BUNDLED

SCRIPTS_TSV = BUNDLED / "unicode_scripts.tsv"
BLOCKS_TSV = BUNDLED / "unicode_blocks.tsv"

COMMON = "Common"
INHERITED = "Inherited"
UNKNOWN = "Unknown"
#: Scripts shared by every writing system (punctuation, digits, spaces, combining marks).
NEUTRAL_SCRIPTS = (COMMON, INHERITED)

#: Common-script letters that nonetheless decide a token's script label (the Katakana-Hiragana prolonged mark).
_LETTER_OVERRIDES = {"\u30fc": "Katakana", "\uff70": "Katakana"}
#: SentencePiece merges these scripts into Han (plus U+30FC, whose script is Common).
_SENTENCEPIECE_HAN = frozenset({"Han", "Hiragana", "Katakana"})

# labels of text without a letter-like character
DIGITS = "Digits"
WHITESPACE = "Whitespace"
EMPTY = "Empty"
SYMBOLS = "Punctuation/Symbols"


def _read_ranges(path) -> tuple[list[int], list[int], list[str]]:
    starts, ends, names = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        a, b, name = line.split("\t")
        starts.append(int(a, 16))
        ends.append(int(b, 16))
        names.append(name.replace("_", " "))
    order = sorted(range(len(starts)), key=starts.__getitem__)
    return [starts[i] for i in order], [ends[i] for i in order], [names[i] for i in order]


@cache
def _script_table() -> tuple[list[int], list[int], list[str]]:
    return _read_ranges(SCRIPTS_TSV)


@cache
def _block_table() -> tuple[list[int], list[int], list[str]]:
    return _read_ranges(BLOCKS_TSV)


def _lookup(table: tuple[list[int], list[int], list[str]], cp: int) -> str | None:
    starts, ends, names = table
    i = bisect.bisect_right(starts, cp) - 1
    if i >= 0 and cp <= ends[i]:
        return names[i]
    return None


# --------------------------------------------------------------------------------------------------
# Scripts
# --------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1 << 16)
def script(ch: str) -> str:
    """The Unicode Script property of one character (``Unknown`` for unassigned or private-use code points)."""
    return _lookup(_script_table(), ord(ch)) or UNKNOWN


@cache
def scripts() -> tuple[str, ...]:
    """Every script name in the table, sorted (Common and Inherited included, Unknown not)."""
    return tuple(sorted(set(_script_table()[2])))


def normalize_name(name: str) -> str:
    """A script or block name reduced for matching user input: upper case, letters and digits only."""
    return re.sub(r"[^A-Z0-9]", "", name.upper())


def find_script(name: str) -> str | None:
    """The script a user-typed name means (`ol_chiki`, `Ol Chiki`, `OLCHIKI` → `Ol Chiki`), or None."""
    key = normalize_name(name)
    for s in scripts():
        if normalize_name(s) == key:
            return s
    return None


def text_scripts(text: str) -> set[str]:
    """The scripts of a string's characters."""
    return {script(ch) for ch in text}


@lru_cache(maxsize=1 << 16)
def deciding_script(ch: str) -> str | None:
    """The script one character decides for a token's label, or None when it does not decide.

    Letters and marks decide (compatibility forms — fullwidth, halfwidth, mathematical letters, µ — count as the
    letter they stand for); Common and Inherited characters, spaces, digits and symbols do not.
    """
    if ch in _LETTER_OVERRIDES:
        return _LETTER_OVERRIDES[ch]
    if ch.isspace() or unicodedata.category(ch)[0] not in "LM":
        return None
    s = script(ch)
    if s in NEUTRAL_SCRIPTS or s == UNKNOWN:
        folded = unicodedata.normalize("NFKC", ch)
        if folded != ch and folded:
            s = script(folded[0])
    if s in NEUTRAL_SCRIPTS:
        return None
    return s


def text_script(text: str) -> str:
    """A token text's script label: its first deciding character's script, else Digits / Whitespace / Empty /
    Punctuation/Symbols."""
    for ch in text:
        s = deciding_script(ch)
        if s is not None:
            return s
    if any(ch.isdigit() for ch in text):
        return DIGITS
    if text.strip() == "":
        return WHITESPACE if text else EMPTY
    return SYMBOLS


@lru_cache(maxsize=1 << 16)
def sentencepiece_script(ch: str) -> str:
    """The script SentencePiece's trainer sees: Hiragana, Katakana and U+30FC count as Han."""
    if ch == "\u30fc":
        return "Han"
    s = script(ch)
    return "Han" if s in _SENTENCEPIECE_HAN else s


# --------------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """One Unicode block: inclusive code-point range and name."""

    start: int
    end: int
    name: str


@cache
def blocks() -> tuple[Block, ...]:
    """Every Unicode block, sorted by start."""
    starts, ends, names = _block_table()
    return tuple(Block(a, b, n) for a, b, n in zip(starts, ends, names))


@lru_cache(maxsize=1 << 16)
def block(ch: str) -> str | None:
    """The Unicode block of one character (None outside every block)."""
    return _lookup(_block_table(), ord(ch))


#: letters up to here are stable letters (:func:`stable_letter_run`) whatever their Unicode 3.2 category
STABLE_LATIN_END = "\u024f"


@cache
def stable_letter_run() -> re.Pattern:
    """A compiled pattern for a run of *stable letters*: characters that are letters (category L*) in Unicode 3.2
    (2002) and in this Python's Unicode version, or letters up to :data:`STABLE_LATIN_END` — letters in any
    Unicode version a tokenizer's regex engine uses (Latin, Greek, Cyrillic, Arabic, Hebrew, CJK ideographs,
    Hangul, kana, …; combining marks are not letters). Built on first use."""
    old = unicodedata.ucd_3_2_0
    keep = [
        c
        for c in range(0x30000)
        if unicodedata.category(chr(c))[0] == "L"
        and (c <= ord(STABLE_LATIN_END) or old.category(chr(c))[0] == "L")
    ]
    ranges, start, prev = [], keep[0], keep[0]
    for c in keep[1:]:
        if c != prev + 1:
            ranges.append((start, prev))
            start = c
        prev = c
    ranges.append((start, prev))
    body = "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b))) for a, b in ranges)
    return re.compile(f"[{body}]+")
