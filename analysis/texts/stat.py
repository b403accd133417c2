"""The corpus-statistic protocol: what a statistic counts on text units, and how its counts add up.

A statistic (:class:`Stat`) has a `map` over one task's documents (:class:`Doc`: a text unit or a
source-attributed record, read from shards by :mod:`analysis.texts.shards`), a `bucket` per key, a `reduce` per
bucket and a `finalize`. The engine's statistics and those a paper method contributes implement it; the corpus
jobs (:mod:`analysis.jobs`) run any of them, in this process or on datatrove, by name from their registry
(:data:`analysis.jobs.stats.STATS`).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import methodcaller
from typing import Any

import numpy as np

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Units handed to the per-text function at a time (bounds the memory of one call).
CHUNK_UNITS = 20_000
#: Units per token_counts call (it builds a private tokenizer per call, so fewer, larger calls).
CHUNK_ENCODE = 200_000
#: SA-BPE records handed to collect_words at a time.
CHUNK_RECORDS = 512
#: A map task writes its counts out (a "spill") once it holds this many distinct keys (checked per chunk).
MAX_KEYS = 2_000_000

Emit = Callable[[Counter], None]


@dataclass
class Doc:
    """One text unit (or source-attributed record) with its group label, repository and language."""

    text: str
    group: str = ""
    repo: str = ""
    language: str = ""
    path: str = ""
    shard: int = 0


def merge_globals(a: dict, b: dict) -> dict:
    """Merge two additive totals: numbers add, dicts merge recursively, lists concatenate."""
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
        elif isinstance(v, dict):
            out[k] = merge_globals(out[k], v)
        elif isinstance(v, list):
            out[k] = list(out[k]) + list(v)
        else:
            out[k] = out[k] + v
    return out


#: a string's UTF-8 bytes (lone surrogates pass through), as a C-level callable for `map`
_UTF8 = methodcaller("encode", "utf-8", "surrogatepass")


def word_bucket(word: str, k: int) -> int:
    """The bucket of a word: CRC-32 of its UTF-8 bytes modulo k (the same in every process)."""
    return zlib.crc32(_UTF8(word)) % k


def word_buckets(words: Sequence[str], k: int) -> np.ndarray:
    """:func:`word_bucket` of every word, in one pass (int64 array)."""
    h = np.fromiter(map(zlib.crc32, map(_UTF8, words)), dtype=np.int64, count=len(words))
    return h % k


def chunks(it: Iterable[Any], n: int) -> Iterator[list[Any]]:
    """Lists of up to n items of an iterable, in order."""
    buf: list[Any] = []
    for x in it:
        buf.append(x)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf


class Stat:
    """One corpus statistic: `map` per task, `bucket` per key, `reduce` per bucket, `finalize` at the end.

    Subclasses set `name` and `layout` (`text`: units; `code`: source-attributed records) and implement
    :meth:`map`, :meth:`bucket` and :meth:`finalize`; :meth:`reduce` is the identity unless overridden.
    """

    name = ""
    layout = "text"
    #: what `finalize` returns, for the help text
    result = ""

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """Check the tokenizer and fill default options (raises UnsupportedTokenizerError / DataError)."""
        return dict(opts)

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """Count one task's documents: call `emit(counter)` for (partial) keyed counts; return the totals."""
        raise NotImplementedError

    def bucket(self, key: Any, k: int) -> int:
        """The bucket (0..k-1) of a key."""
        raise NotImplementedError

    def buckets(self, keys: Sequence[Any], k: int) -> np.ndarray:
        """The bucket of every key (int64 array); statistics may do it in one pass instead of per key."""
        bucket = self.bucket
        return np.fromiter((bucket(key, k) for key in keys), dtype=np.int64, count=len(keys))

    def symbols(self, tok: LoadedTokenizer, opts: dict) -> np.ndarray | None:
        """When :meth:`reduce` returns tuples of ids: the strings they stand for (object array, id → string),
        through which the final stage reads them back; None (default): keys are read as written."""
        return None

    def reduce(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Counter:
        """Post-process one bucket's summed counts (e.g. segment the words); default: unchanged."""
        return counts

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """Turn the summed counts of every bucket and the totals into the consumer's input."""
        raise NotImplementedError


def memory_options(opts: dict) -> dict:
    """The map's memory knobs when given: `max_keys` (spill threshold), `chunk_units` (units per call)."""
    out = {}
    for k in ("max_keys", "chunk_units"):
        if opts.get(k) is not None:
            v = int(opts[k])
            if v < 1:
                raise DataError(f"{k} must be positive")
            out[k] = v
    return out
