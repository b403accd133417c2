"""The runtime settings a tokenizer file carries that Tokenizer Lab switches off (truncation, padding), in words.

Every view encodes with truncation and padding off (`LoadedTokenizer.tokenizer`), so that a text is measured
whole; a file that sets them would otherwise cut or pad silently. This module says what was switched off.
"""

from __future__ import annotations

from analysis.tokenizer.tokenizer import LoadedTokenizer


def switched_off(tok: LoadedTokenizer) -> list[str]:
    """The tokenizer.json runtime settings the app does not apply, one phrase each ([] when there are none)."""
    doc = tok._doc  # read-only look at the parsed document (no copy)
    out = []
    trunc = doc.get("truncation")
    if isinstance(trunc, dict):
        detail = ", ".join(
            f"{k} {trunc[k]}" for k in ("max_length", "strategy", "direction", "stride") if k in trunc
        )
        out.append(f"truncation ({detail})")
    pad = doc.get("padding")
    if isinstance(pad, dict):
        strategy = pad.get("strategy")
        length = strategy.get("Fixed") if isinstance(strategy, dict) else strategy
        out.append(f"padding ({length}, with {pad.get('pad_token', '?')!r})")
    return out


def switched_off_note(tok: LoadedTokenizer, name: str | None = None) -> str | None:
    """One sentence for a page or the CLI, or None when the file sets neither truncation nor padding."""
    items = switched_off(tok)
    if not items:
        return None
    return (f"{name or tok.name}'s file sets {' and '.join(items)}: Tokenizer Lab encodes without it, so every "
            "text is measured whole.")  # fmt: skip
