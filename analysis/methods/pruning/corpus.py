"""Pruning's corpus statistics: the token-id counts of the frequency orders and the merge counts of the merge-based
order, counted shard by shard by the corpus jobs (registered in :data:`analysis.jobs.stats.PLUGINS`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from analysis.errors import DataError
from analysis.texts.stat import CHUNK_ENCODE, CHUNK_UNITS, Doc, Emit, Stat, chunks
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .common import token_counts
from .orders import merge_counts


class TokenIds(Stat):
    """:func:`analysis.methods.pruning.common.token_counts` (specials added, merges always applied) → id count vector."""

    name = "token-ids"
    result = "numpy int64 vector (index = id)"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """`add_special_tokens` (default True, as pruning counts)."""
        return {"add_special_tokens": bool(opts.get("add_special_tokens", True))}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """token_counts over chunks of units."""
        acc: Counter = Counter()
        units = 0
        for chunk in chunks((d.text for d in docs), CHUNK_ENCODE):
            v = token_counts(tok, chunk, add_special_tokens=opts["add_special_tokens"])
            nz = np.flatnonzero(v)
            acc.update(dict(zip(nz.tolist(), v[nz].tolist())))
            units += len(chunk)
        emit(acc)
        return {"units": units}

    def bucket(self, key: Any, k: int) -> int:
        """By the id."""
        return int(key) % k

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """The id count vector (length max id + 1)."""
        if not totals.get("units"):
            raise DataError("the text sample is empty")
        size = max(tok.id_to_token) + 1 if tok.id_to_token else 0
        out = np.zeros(size, dtype=np.int64)
        for i, c in counts.items():
            if 0 <= i < size:
                out[i] += c
        return out


class MergeCounts(Stat):
    """:func:`analysis.methods.pruning.orders.merge_counts` (final tokens and merge events of the BPE replay) → two Counters.

    Keys: ``(0, id)`` for final-token counts, ``(1, left_id, right_id)`` for merge counts (the merge-based
    pruning order).
    """

    name = "merge-counts"
    result = "(Counter id → final count, Counter (left, right) → merge count)"

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """merge_counts over chunks of units."""
        acc: Counter = Counter()
        units = 0
        for chunk in chunks((d.text for d in docs), opts.get("chunk_units", CHUNK_UNITS)):
            tcounts, mcounts = merge_counts(tok, chunk)
            acc.update({(0, i): c for i, c in tcounts.items()})
            acc.update({(1, a, b): c for (a, b), c in mcounts.items()})
            units += len(chunk)
        emit(acc)
        return {"units": units}

    def bucket(self, key: Any, k: int) -> int:
        """By the (left) id."""
        return int(key[1]) % k

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """(final-token Counter, merge Counter), the arguments of merge_based_order(counts=…)."""
        if not totals.get("units"):
            raise DataError("the text sample is empty")
        tcounts: Counter = Counter()
        mcounts: Counter = Counter()
        for key, c in counts.items():
            if key[0] == 0:
                tcounts[key[1]] = c
            else:
                mcounts[(key[1], key[2])] = c
        return tcounts, mcounts
