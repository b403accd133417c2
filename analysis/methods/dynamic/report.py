"""The typed result of dynamic tokenization: the merges of a batch (:class:`MergeStep`), the run
(:class:`DynamicResult`) and the one JSON document of the CLI and the page (:class:`DynamicReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analysis.errors import DataError


# --------------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------------
@dataclass
class MergeStep:
    """One merge of the batch: the pair, its frequency when chosen and how many occurrences were replaced."""

    left: str
    right: str
    merged: str
    count: int
    replaced: int


@dataclass
class DynamicResult:
    """Dynamic tokenization of one batch."""

    tokenizer: str
    boundary: str
    texts: list[str]
    base_tokens: list[list[str]]
    base_ids: list[list[int]]
    base_offsets: list[list[tuple[int, int]]]
    tokens: list[list[str]]
    #: per sequence, the half-open range of base-token indices each merged token covers
    spans: list[list[tuple[int, int]]]
    merges: list[MergeStep]
    #: average sequence length after k merges, k = 0..len(merges)
    merges2seqlen: list[float]
    #: True when the loop stopped because no valid pair was left (word/pre-token level reached)
    exhausted: bool
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def lengths_before(self) -> list[int]:
        """Sequence lengths under the base tokenizer."""
        return [len(s) for s in self.base_tokens]

    @property
    def lengths_after(self) -> list[int]:
        """Sequence lengths after the merges."""
        return [len(s) for s in self.tokens]

    @property
    def unique_tokens(self) -> list[str]:
        """The batch vocabulary after merging, in order of first appearance."""
        return list(dict.fromkeys(t for seq in self.tokens for t in seq))

    @property
    def reduction_pct(self) -> float:
        """Relative reduction of the total sequence length, in percent."""
        before = sum(self.lengths_before)
        return 100.0 * (1 - sum(self.lengths_after) / before) if before else 0.0

    def reduction_curve(self, relative_to_max: bool = False) -> list[float]:
        """Reduction % after k merges (of the initial length, or of the maximum reduction when exhausted)."""
        curve = self.merges2seqlen
        if not curve or curve[0] == 0:
            return [0.0 for _ in curve]
        base = curve[0]
        denom = (base - curve[-1]) if relative_to_max else base
        if relative_to_max and not self.exhausted:
            raise DataError(
                "the maximum reduction is only known when merging ran until no valid pair was left"
            )
        if denom <= 0:
            return [0.0 for _ in curve]
        return [100.0 * (base - v) / denom for v in curve]

    def merges_for_reduction(self, target_pct: float, relative_to_max: bool = False) -> int | None:
        """The fewest merges whose reduction reaches target_pct (None when this run never reaches it)."""
        for k, r in enumerate(self.reduction_curve(relative_to_max)):
            if r >= target_pct - 1e-9:
                return k
        return None

    def to_json(self) -> dict:
        """JSON-friendly result."""
        return {
            "tokenizer": self.tokenizer,
            "boundary": self.boundary,
            "n_sequences": len(self.tokens),
            "merges_performed": len(self.merges),
            "exhausted": self.exhausted,
            "total_before": sum(self.lengths_before),
            "total_after": sum(self.lengths_after),
            "reduction_pct": round(self.reduction_pct, 4),
            "lengths_before": self.lengths_before,
            "lengths_after": self.lengths_after,
            "merges": [m.__dict__ for m in self.merges],
            "merges2seqLen": self.merges2seqlen,
            "unique_tokens": self.unique_tokens,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 6),
            "special_tokens": bool(self.extra.get("special_tokens", False)),
        }


@dataclass
class DynamicReport:
    """The Dynamic tokenization result of one batch: what `python -m analysis dynamic --json` prints and the page
    offers as JSON (:meth:`to_json`, one schema): the run with its merges, optionally the merges a target
    reduction needs, the full curve (merging until no valid pair is left) and the FVT embeddings' cost."""

    result: DynamicResult
    #: the target reduction in percent (None: not asked)
    target_pct: float | None = None
    #: the same batch merged until no valid pair is left (at most :data:`FULL_CURVE_MERGES` merges)
    full: DynamicResult | None = None
    #: ``{"model": …, **BatchEmbeddings.report()}`` (+ ``out`` when the rows were written)
    embeddings: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """:meth:`DynamicResult.to_json` plus ``target_reduction_pct`` / ``merges_for_target`` (of this run),
        ``full_curve`` (average lengths, exhausted, merges for the target on the full curve and, once exhausted,
        on the paper's scale of the maximum reduction) and ``embeddings``, each when present."""
        d = self.result.to_json()
        if self.target_pct is not None:
            d["target_reduction_pct"] = self.target_pct
            d["merges_for_target"] = self.result.merges_for_reduction(self.target_pct)
        if self.full is not None:
            f = self.full
            curve: dict[str, Any] = {"merges2seqLen": f.merges2seqlen, "exhausted": f.exhausted}
            if self.target_pct is not None:
                curve["merges_for_target"] = f.merges_for_reduction(self.target_pct)
                curve["merges_for_target_of_max"] = (
                    f.merges_for_reduction(self.target_pct, relative_to_max=True) if f.exhausted else None
                )
            d["full_curve"] = curve
        if self.embeddings is not None:
            d["embeddings"] = self.embeddings
        return d
