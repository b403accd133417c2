"""Plans: one training run (continued) or one auxiliary vocabulary (naive) from which any prefix 1..N of the
new tokens is applied without retraining."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from analysis.bpe import MergeTable
from analysis.bpe.training import TrainingResult, continue_training
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .methods import (
    METHODS,
    AuxVocab,
    Extension,
    ParityText,
    append_to_model,
    aux_new_tokens,
    extend_add_tokens,
    extend_regen,
    extend_wordpiece,
    filter_merges,
    methods_for,
    next_id,
    regen_merges,
    train_auxiliary_for,
)


# --------------------------------------------------------------------------------------------------
# Plans: one training run / one auxiliary vocabulary → every prefix
# --------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    """Everything needed to apply a method at any n ≤ n_max without retraining.

    `min_frequency` (continued training) keeps only the prefix of new tokens whose training pair frequency
    reaches it; the naive methods' auxiliary tokenizer was trained with it already.
    """

    method: str
    base: LoadedTokenizer
    n_max: int
    training: TrainingResult | None = None
    aux: AuxVocab | None = None
    seconds: float = 0.0
    min_frequency: int = 0
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def n_available(self) -> int:
        """How many new tokens this plan can give (may be < n_max on a small text or above a threshold)."""
        return len(self.all_tokens())

    def all_tokens(self) -> list[str]:
        """Every candidate new token in order (raw vocabulary strings)."""
        if "all" not in self._cache:
            if self.training is not None:
                toks = []
                for s in self.training.steps:  # pair frequencies never grow along the run: cut at the first
                    if s.pair is not None and s.freq < self.min_frequency:
                        break
                    if s.new:
                        toks.append(s.token)
            else:
                assert self.aux is not None
                toks = aux_new_tokens(self.base, self.aux, self.n_max)
            self._cache["all"] = toks
        return self._cache["all"]

    def tokens(self, n: int) -> list[str]:
        """The new tokens of the prefix n."""
        return self.all_tokens()[:n]

    def merges(self, n: int) -> list[tuple[str, str]]:
        """The merges appended for the prefix n (empty for add-tokens / wordpiece); cached per n."""
        return self._cached(("merges", n), lambda: self._merges(n))

    def merge_table(self, n: int) -> MergeTable:
        """The merges of the prefix n as the replay's rank table (cached per n)."""
        return self._cached(("table", n), lambda: MergeTable(self.merges(n)))

    def _cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            if len(self._cache) > 16:
                for k in [k for k in self._cache if k != "all"][:8]:
                    del self._cache[k]
            self._cache[key] = make()
        return self._cache[key]

    def _merges(self, n: int) -> list[tuple[str, str]]:
        toks = self.tokens(n)
        if self.method == "continued":
            assert self.training is not None
            return filter_merges(self.base, toks, self.training.merges(n))
        if self.method == "regen":
            nid = next_id(self.base)
            combined = dict(self.base.vocab)
            for i, t in enumerate(toks):
                combined.setdefault(t, nid + i)
            return filter_merges(self.base, toks, regen_merges(toks, combined))
        if self.method == "merges":
            assert self.aux is not None
            return filter_merges(self.base, toks, self.aux.merges)
        return []

    def apply(self, n: int) -> Extension:
        """Build the extended tokenizer for the first n new tokens."""
        n = min(n, self.n_available)
        toks = self.tokens(n)
        if self.method == "continued":
            return append_to_model(self.base, toks, self.merges(n), "continued")
        if self.method == "regen":
            return extend_regen(self.base, toks)
        if self.method == "merges":
            return append_to_model(self.base, toks, self.merges(n), "merges")
        if self.method == "add-tokens":
            return extend_add_tokens(self.base, toks)
        if self.method == "wordpiece":
            return extend_wordpiece(self.base, toks)
        raise DataError(f"unknown extension method {self.method!r} (choose from {', '.join(METHODS)})")


def _reiter(units) -> Callable[[], Iterable[str]]:
    if callable(units) and not hasattr(units, "__iter__"):
        return units
    if hasattr(units, "__next__"):
        kept = list(units)
        return lambda: iter(kept)
    return lambda: iter(units)


def plan(
    base: LoadedTokenizer,
    method: str,
    units: Any,
    n_max: int,
    *,
    max_token_length: int | None = None,
    aux: AuxVocab | None = None,
    training: TrainingResult | None = None,
    min_frequency: int = 0,
    parity: ParityText | None = None,
) -> Plan:
    """Run the training a method needs once (continued training or the auxiliary tokenizer) for up to n_max.

    `min_frequency`: supplementary tokens rarer than this in the training text are not added (Kim 2025's
    thresholds). `parity`: the naive methods' auxiliary tokenizer is the parity-aware BPE trained on these
    per-language corpora (`units` is then not read); continued training has no parity-aware variant here.
    """
    if method not in METHODS:
        raise DataError(f"unknown extension method {method!r} (choose from {', '.join(METHODS)})")
    if method not in methods_for(base):
        raise UnsupportedTokenizerError(
            f"method {method!r} does not apply to {base.name} ({base.model_type}); "
            f"available: {', '.join(methods_for(base))}"
        )
    if n_max <= 0:
        raise DataError("the number of new tokens must be positive")
    if min_frequency < 0:
        raise DataError("the minimum frequency must be ≥ 0")
    t0 = time.perf_counter()
    get = _reiter(units)
    if method == "continued":
        if parity is not None:
            raise UnsupportedTokenizerError(PARITY_CONTINUED)
        training = training or continue_training(
            base, get, n_max, max_token_length=max_token_length, min_frequency=min_frequency
        )
        p = Plan(method, base, n_max, training=training, seconds=time.perf_counter() - t0,
                 min_frequency=min_frequency)  # fmt: skip
        if not p.all_tokens():
            raise DataError(f"no new token reaches the minimum frequency {min_frequency}")
        return p
    aux = aux or train_auxiliary_for(
        base, get, n_max, max_token_length=max_token_length, min_frequency=min_frequency, parity=parity
    )
    p = Plan(method, base, n_max, aux=aux, seconds=time.perf_counter() - t0, min_frequency=min_frequency)
    if not p.all_tokens():
        raise DataError("the training text gave no token the tokenizer does not already have")
    return p


#: Why continued training has no parity-aware variant.
PARITY_CONTINUED = (
    "parity-aware training applies to the naive methods' auxiliary tokenizer (trained from scratch by the "
    "`tokenizers` parity-aware trainer); continued training runs the project's own incremental trainer on top of "
    "the base's merges, which has no parity-aware merge choice"
)


def extend(
    base: LoadedTokenizer, method: str, units: Any, n: int, *, max_token_length: int | None = None
) -> Extension:
    """One-shot: train what the method needs on the text and return the tokenizer extended by n tokens."""
    return plan(base, method, units, n, max_token_length=max_token_length).apply(n)
