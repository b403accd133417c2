"""The defaults of an extension, shared by the Extend page and `python -m analysis extend` (docs/defaults.md).

The page differs from the command line only where an interactive run must stay short, and then the page says why
next to the widget and its equivalent command states the page's value (`--max-chars`, `--n`)."""

from __future__ import annotations

from collections.abc import Mapping

#: The method `extend` runs without --method.
DEFAULT_METHOD = "continued"
#: Minimum pair frequency of a new token (0: none), the page's box and --min-frequency.
DEFAULT_MIN_FREQUENCY = 0
#: Rows of the new tokens in a model export (--init and the page's "New rows").
DEFAULT_INIT = "fvt"
#: The page's starting N (the command line asks for --n; the page's command states it).
PAGE_N = 1000
#: The page's character budget: one interactive training run on two shared cores stays within seconds; the
#: command line reads the whole text unless --max-chars (the page's command states the budget).
PAGE_MAX_CHARS = 5_000_000


def heldout_label(lang: str) -> str:
    """A FLORES language's held-out lines as the report names them (the page's and --heldout-flores)."""
    return f"{lang} (FLORES held-out)"


def default_corpora(lang: str, corpora: Mapping[str, object]) -> list[str]:
    """The shared corpora the page trains on by default besides the FLORES training lines: the language's own
    text corpus (``text/<lang>.txt.gz``) when the shared assets hold it."""
    return [k for k in (f"text/{lang}.txt.gz",) if k in corpora]
