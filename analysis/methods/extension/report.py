"""The result of one extension run (CLI `extend`, the Extend page's export) and its one JSON document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.bpe import unreachable_ids
from analysis.bpe.training import TrainingResult
from analysis.measure.corpus_counts import bytes_per_token
from analysis.measure.robustness import RobustnessDelta

from .methods import METHOD_LABELS, AuxVocab, Extension

#: The context length of "characters per 2,048 tokens" (Kim 2025, Table 16).
CONTEXT_TOKENS = 2048


# --------------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------------
def unreachable_added(ext: Extension) -> list[str]:
    """Added tokens that the Self-Tokenization Test cannot reach (none for non-BPE models or added tokens)."""
    if ext.tokenizer.model_type != "BPE" or ext.method == "add-tokens":
        return []
    bad = unreachable_ids(ext.tokenizer)
    ids = set(ext.added_ids)
    return [ext.tokenizer.id_to_token[i] for i in sorted(bad & ids)]


def chars_per_context(
    bytes_per_tok: float, n_chars: int, n_bytes: int, context: int = CONTEXT_TOKENS
) -> float:
    """Characters a context of `context` tokens holds on a text: context × Σ characters / Σ tokens, from its
    bytes/token and its character and byte totals (Kim 2025 measures "characters per 2,048 tokens")."""
    if not n_bytes or bytes_per_tok != bytes_per_tok:  # NaN: no tokens
        return float("nan")
    return context * bytes_per_tok * n_chars / n_bytes


def heldout_measures(base, extended, lines: Sequence[str]) -> dict[str, float]:
    """Bytes/token and characters per 2,048 tokens of a held-out text, before and after the extension."""
    kept = [s for s in lines if s]
    n_chars = sum(len(s) for s in kept)
    n_bytes = sum(len(s.encode("utf-8")) for s in kept)
    b0 = bytes_per_token(base, kept)
    b1 = bytes_per_token(extended, kept)
    return {
        "bytes_per_token_before": b0,
        "bytes_per_token_after": b1,
        "delta_rel": (b1 - b0) / b0 if b0 else float("nan"),
        "chars_per_2048_before": chars_per_context(b0, n_chars, n_bytes),
        "chars_per_2048_after": chars_per_context(b1, n_chars, n_bytes),
    }


# --------------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------------
@dataclass
class ExtendResult:
    """One extension run: the extended tokenizer and everything its report holds.

    :meth:`to_json` is the one document of the run: `python -m analysis extend --json` prints it, `--out` writes
    it as ``extension_report.json``, and the Extend page offers the same file in its export. `corpus` says how
    the training words were counted (the corpus executor's summary), `parity` compares the parity-aware
    auxiliary tokenizer with the plain one, `model` describes the exported model, `out` the written folder.
    """

    extension: Extension
    n_requested: int
    text: str = ""
    text_chars: int | None = None
    heldout: Mapping[str, Sequence[str]] = field(default_factory=dict)
    seconds: float | None = None
    training: TrainingResult | None = None
    aux: AuxVocab | None = None
    min_frequency: int = 0
    corpus: dict[str, Any] | None = None
    parity: dict[str, Any] | None = None
    model: dict[str, Any] | None = None
    out: str | None = None
    #: words kept whole, digit grouping, round trip and encode times before → after (None: not measured)
    robustness: RobustnessDelta | None = None
    _measured: dict[str, Any] | None = field(default=None, repr=False)

    def _measures(self) -> dict[str, Any]:
        """The STT of the added tokens and the held-out measures (computed once)."""
        if self._measured is None:
            ext = self.extension
            per = {
                name: heldout_measures(ext.base, ext.tokenizer, lines) for name, lines in self.heldout.items()
            }
            self._measured = {"unreachable": unreachable_added(ext), "heldout": per}
        return self._measured

    def to_json(self) -> dict[str, Any]:
        """The report: method, text, N, added/unreachable counts, held-out bytes/token and characters per 2,048
        tokens before/after, the added tokens, and the corpus, parity, model and output entries when present."""
        ext = self.extension
        m = self._measures()
        unreach = m["unreachable"]
        rep: dict[str, Any] = {
            "base": ext.base.name,
            "base_hash": ext.base.content_hash,
            "method": ext.method,
            "method_label": METHOD_LABELS.get(ext.method, ext.method),
            "n_requested": self.n_requested,
            "min_frequency": self.min_frequency,
            "added": ext.n_added,
            "merges_added": len(ext.merges),
            "unreachable_added": len(unreach),
            "unreachable_tokens": [ext.tokenizer.readable(t) for t in unreach[:200]],
            "vocab_size_before": ext.base.vocab_size,
            "vocab_size_after": ext.tokenizer.vocab_size,
            "text": self.text,
            "text_chars": self.text_chars,
            "seconds": self.seconds,
        }
        if self.training is not None:
            rep["training"] = self.training.to_json()
        if self.aux is not None:
            rep["auxiliary"] = {
                "trainer": self.aux.trainer,
                "vocab_size": len(self.aux.tokens),
                "min_frequency": self.aux.min_frequency,
                "languages": list(self.aux.languages),
                "seconds": self.aux.seconds,
            }
        if m["heldout"]:
            first = next(iter(m["heldout"].values()))
            for k in ("bytes_per_token_before", "bytes_per_token_after", "chars_per_2048_before",
                      "chars_per_2048_after"):  # fmt: skip
                rep[k] = first[k]
            rep["heldout"] = m["heldout"]
        if self.robustness is not None:
            rep["robustness"] = self.robustness.to_json()
        for key in ("corpus", "parity", "model", "out"):
            value = getattr(self, key)
            if value is not None:
                rep[key] = value
        rep["added_tokens"] = [
            {"id": i, "token": t, "text": ext.tokenizer.readable(t) if ext.method != "add-tokens" else t}
            for t, i in zip(ext.added, ext.added_ids)
        ]
        return rep
