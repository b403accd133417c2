"""The JSON report of one extension run (CLI and export)."""

from __future__ import annotations

from collections.abc import Sequence

from ..bpe import unreachable_ids
from ..metrics import bytes_per_token
from .methods import METHOD_LABELS, Extension


# --------------------------------------------------------------------------------------------------
# Report of one run (CLI, export)
# --------------------------------------------------------------------------------------------------
def unreachable_added(ext: Extension) -> list[str]:
    """Added tokens that the Self-Tokenization Test cannot reach (none for non-BPE models or added tokens)."""
    if ext.tokenizer.model_type != "BPE" or ext.method == "add-tokens":
        return []
    bad = unreachable_ids(ext.tokenizer)
    ids = set(ext.added_ids)
    return [ext.tokenizer.id_to_token[i] for i in sorted(bad & ids)]


def extension_report(
    ext: Extension,
    *,
    n_requested: int,
    text: str = "",
    text_chars: int | None = None,
    heldout: dict[str, Sequence[str]] | None = None,
    seconds: float | None = None,
) -> dict:
    """The JSON report of one extension run: method, text, N, added/unreachable counts, bytes/token before/after."""
    unreach = unreachable_added(ext)
    rep: dict = {
        "base": ext.base.name,
        "base_hash": ext.base.content_hash,
        "method": ext.method,
        "method_label": METHOD_LABELS.get(ext.method, ext.method),
        "n_requested": n_requested,
        "added": ext.n_added,
        "merges_added": len(ext.merges),
        "unreachable_added": len(unreach),
        "unreachable_tokens": [ext.tokenizer.readable(t) for t in unreach[:200]],
        "vocab_size_before": ext.base.vocab_size,
        "vocab_size_after": ext.tokenizer.vocab_size,
        "text": text,
        "text_chars": text_chars,
        "seconds": seconds,
        "added_tokens": [
            {"id": i, "token": t, "text": ext.tokenizer.readable(t) if ext.method != "add-tokens" else t}
            for t, i in zip(ext.added, ext.added_ids)
        ],
    }
    if heldout:
        per = {}
        for name, lines in heldout.items():
            b0 = bytes_per_token(ext.base, list(lines))
            b1 = bytes_per_token(ext.tokenizer, list(lines))
            per[name] = {
                "bytes_per_token_before": b0,
                "bytes_per_token_after": b1,
                "delta_rel": (b1 - b0) / b0 if b0 else float("nan"),
            }
        first = next(iter(per.values()))
        rep["bytes_per_token_before"] = first["bytes_per_token_before"]
        rep["bytes_per_token_after"] = first["bytes_per_token_after"]
        rep["heldout"] = per
    return rep
