"""The defaults of token reuse, shared by the Token reuse page and `python -m analysis reuse` (docs/defaults.md).

The page differs from the command line in one place, its training text (FLORES lines alone, so that a training
run stays interactive; the command line adds the shared corpora unless --no-corpora), and its equivalent command
then says --no-corpora."""

from __future__ import annotations

#: Target scripts and the FLORES language each trains on and is measured on (the page's choices; `--train-lang`
#: defaults to the target's).
TARGET_LANGS = {"arabic": "arb_Arab", "hebrew": "heb_Hebr", "cyrillic": "rus_Cyrl", "devanagari": "hin_Deva",
                "thai": "tha_Thai", "greek": "ell_Grek", "armenian": "hye_Armn", "georgian": "kat_Geor",
                "ethiopic": "amh_Ethi"}  # fmt: skip
#: The target script `reuse` and the page start with.
DEFAULT_TARGET = "arabic"
#: Scripts whose tokens are kept by default.
DEFAULT_PRESERVED = ("latin", "greek")
#: The threshold h on reusable ids.
DEFAULT_MIN_REUSABLE = 20_000
#: Minimum pair frequency of the new BPE (2 stops FLORES-only training early).
DEFAULT_MIN_FREQUENCY = 2
#: Most frequent words taken from a shared word-frequency list.
DEFAULT_MAX_WORDS = 200_000
#: The protections on by default: shared punctuation and symbols are never reused.
SAFE_PROTECT = ("symbols",)
#: The trainer of the target tokenizer.
DEFAULT_TRAINER = "bpe"
#: Whether the page trains on the shared corpora by default (the command line does, unless --no-corpora).
PAGE_CORPORA = False


def target_lang(target: str) -> str:
    """The FLORES language of a target script (arb_Arab for an unknown one, as before targets had languages)."""
    return TARGET_LANGS.get(target, TARGET_LANGS[DEFAULT_TARGET])
