"""Rule-based token classes (Chizhov, Bogomolov, Yamshchikov, "From Where Words Come: Efficient
Regularization of Code Tokenizers Through Source Attribution", 2025, App. A)."""

from __future__ import annotations

import re
import string
import unicodedata

from analysis.tokenizer.alphabets import SPIECE_UNDERLINE

TOKEN_CLASSES = (
    "Special tokens",
    "Digits and numbers",
    "Punctuation",
    "Variable or function names",
    "ALL-CAPS Latin words",
    "Other Latin words",
    "Non-Latin words or characters",
    "Other",
)
_SPECIAL_RE = re.compile(r"<[^>]+>|\[[A-Za-z][^\]]*\]")
_NUMBER_RE = re.compile(r"[+-]?\d+")
_SNAKE_RE = re.compile(r"_*[A-Za-z0-9]+(?:_+[A-Za-z0-9]+)*_*")
_CAMEL_RE = re.compile(r"[A-Za-z]*[A-Z][A-Za-z]*")


def _is_latin_letter(ch: str) -> bool:
    return ch.isalpha() and unicodedata.name(ch, "").startswith("LATIN")


def token_class(text: str, *, special: bool = False) -> str:
    """Rule-based class of a token (Chizhov et al., App. A), applied to its text without surrounding whitespace.

    Rules in order: special (`<…>`, `[…]` or a registered special token); digits with optional sign;
    punctuation (> 80% of the characters are `string.punctuation` or Unicode P*); variable/function names
    (words joined by `_`, or the paper's regex `^[a-zA-Z]*[A-Z][a-zA-Z]*$` restricted to names with an
    internal capital — as written the regex also matches every capitalised or all-caps word, which would leave
    the ALL-CAPS class empty, unlike the paper's Table 1); ALL-CAPS Latin; other Latin words; non-Latin.
    """
    t = text.strip().replace(SPIECE_UNDERLINE, " ").strip()
    if special or (_SPECIAL_RE.fullmatch(t) and "⟨" not in t):
        return "Special tokens"
    if not t or "⟨" in t:  # whitespace-only, or a partial UTF-8 fragment
        return "Other"
    if _NUMBER_RE.fullmatch(t):
        return "Digits and numbers"
    n_punct = sum(1 for c in t if c in string.punctuation or unicodedata.category(c).startswith("P"))
    if n_punct / len(t) > 0.8:
        return "Punctuation"
    if ("_" in t and _SNAKE_RE.fullmatch(t) and any(c.isalpha() for c in t)) or (
        _CAMEL_RE.fullmatch(t) and (re.search(r"[a-z][A-Z]", t) or re.search(r"[A-Z]{2}[a-z]", t))
    ):
        return "Variable or function names"
    if all(_is_latin_letter(c) for c in t):
        return "ALL-CAPS Latin words" if t.isupper() else "Other Latin words"
    if any(
        ord(c) > 127 and not _is_latin_letter(c) and not unicodedata.category(c).startswith(("P", "Z"))
        for c in t
    ):
        return "Non-Latin words or characters"
    return "Other"
