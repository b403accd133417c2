"""Rényi efficiency of a unigram distribution (the tokenization-scorer definition of Zouhar, Meister, Gastaldi,
Du, Sachan, Cotterell, "Tokenization and the Noiseless Channel", ACL 2023), on any hashable tokens or id counts.

:data:`DEFAULT_POWER` (α = 2.5) is the default of every metric that reads it (:mod:`analysis.measure.metrics`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: The Rényi order α of every efficiency this engine reports unless told otherwise.
DEFAULT_POWER = 2.5
#: Rényi vocabulary modes: the tokenizer's vocabulary size, or the number of observed token types.
VOCAB_MODES = ("tokenizer", "observed")


def renyi_entropy_from_counts(counts: Sequence[float] | np.ndarray, power: float = DEFAULT_POWER) -> float:
    """Rényi entropy H_α (bits) of the unigram distribution given by type counts (zeros ignored)."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    if c.size == 0:
        return 0.0
    p = c / c.sum()
    if power == 1.0:
        return float(-(p * np.log2(p)).sum())
    if math.isinf(power):
        return float(-np.log2(p.max()))
    return float(np.log2(np.power(p, power).sum()) / (1.0 - power))


def renyi_efficiency_from_counts(
    counts: Sequence[float] | np.ndarray, power: float = DEFAULT_POWER, vocab_size: int | None = None
) -> float:
    """Rényi efficiency H_α / log2 V; V = vocab_size, or the number of observed types when None."""
    c = np.asarray(counts, dtype=np.float64)
    v = int((c > 0).sum()) if vocab_size is None else int(vocab_size)
    if v <= 1:
        return 0.0
    return renyi_entropy_from_counts(c, power) / math.log2(v)


def renyi_efficiency(
    tokens: Iterable[Any], power: float = DEFAULT_POWER, vocab_size: int | None = None
) -> float:
    """Rényi efficiency of a token sequence (ids or strings), as tokenization-scorer computes it."""
    counts: dict[Any, int] = {}
    for t in tokens:
        counts[t] = counts.get(t, 0) + 1
    return renyi_efficiency_from_counts(np.fromiter(counts.values(), dtype=np.float64), power, vocab_size)


def renyi_entropy(tokens: Iterable[Any], power: float = DEFAULT_POWER) -> float:
    """Rényi entropy (bits) of a token sequence's unigram distribution."""
    counts: dict[Any, int] = {}
    for t in tokens:
        counts[t] = counts.get(t, 0) + 1
    return renyi_entropy_from_counts(np.fromiter(counts.values(), dtype=np.float64), power)
