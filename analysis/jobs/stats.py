"""The corpus statistics, each split into map (per shard group), bucket reduce and finalize (the protocol:
:mod:`analysis.texts.stat`), and their one registry: the engine's own statistics and those paper methods
contribute (:data:`PLUGINS`), all by name (:func:`get_stat`).

Every statistic runs the project's existing per-text function in its map stage and only adds up what that
function returns, so a map over any partition of the corpus followed by the reduce gives exactly the
single-process result:

==================  ==================================================  ==========================================
statistic           map (per task, existing function)                   reduce / finalize
==================  ==================================================  ==========================================
``pretokens``       :func:`analysis.bpe.words.count_pretokens`           sum → Counter of pre-tokens
``words``           ``count_pretokens`` (SentencePiece mode: ``▁``      sum; segment each bucket with
                    chunks, NFKC) + character counts                    :func:`~analysis.bpe.words.segment_ids`
                                                                        (+ :func:`~analysis.bpe.training.sp_groups`
                                                                        after the coverage characters) → the
                                                                        trainer's word Counter
``token-ids``       :func:`analysis.methods.pruning.token_counts`               sum → id count vector (pruning orders)
``produced-ids``    :func:`analysis.bpe.stt.corpus_token_counts`   sum → Counter (never-produced tokens)
``merge-counts``    :func:`analysis.methods.pruning.merge_counts`               sum → (token Counter, merge Counter)
                                                                        for the merge-based pruning order
``compression``     ``encode_ids``, ``text_counts``, ``continued_words``  per group: sum of token-id counts and
                    (:mod:`analysis.measure.corpus_counts`)              additive totals, then the metrics of
                                                                        :func:`analysis.measure.metrics.corpus_stats`
``source-words``    :func:`analysis.methods.sabpe.sabpe.collect_words`                sum per (word, repository) and (word,
                                                                        language) → :class:`~analysis.methods.sabpe.sabpe.SourceWords`
==================  ==================================================  ==========================================

Keyed counts go to K hash buckets by a stable hash of the word (CRC-32; Python's ``hash`` differs between
processes) or by the id, so all counts of one key meet in one bucket: a bucket's reduce holds only that bucket's
keys, and the buckets' results are disjoint (summed again at the end, which also covers two pre-tokens that
segment to the same word). Small additive totals ("globals": units, characters, per-group totals, the
SentencePiece character histogram) are merged in every reduce task and at the end.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis import bpe
from analysis.bpe import training, words
from analysis.bpe.training import TrainingWords
from analysis.core.cache import memoize
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.measure import corpus_counts, metrics, renyi
from analysis.texts.stat import (
    CHUNK_UNITS,
    MAX_KEYS,
    Doc,
    Emit,
    Stat,
    chunks,
    memory_options,
    merge_globals,
    word_bucket,
    word_buckets,
)
from analysis.tokenizer.tokenizer import LoadedTokenizer


# --------------------------------------------------------------------------------------------------
# Pre-token counts and training words
# --------------------------------------------------------------------------------------------------
def _count_bounded(
    counter: words.PretokenCounter,
    texts: Iterable[str],
    opts: dict,
    emit: Emit,
    on_chunk: Callable[[list[str]], Any] | None = None,
) -> None:
    """Feed the texts to the pre-token counter chunk by chunk (`on_chunk` sees each chunk first); emit its
    counts whenever it holds `max_keys` distinct keys, and at the end."""
    max_keys = opts.get("max_keys", MAX_KEYS)
    for chunk in chunks(texts, opts.get("chunk_units", CHUNK_UNITS)):
        if on_chunk is not None:
            on_chunk(chunk)
        counter.add(chunk)
        if counter.size >= max_keys:
            emit(counter.take())
    emit(counter.take())


@dataclass
class PretokenCounts:
    """Pre-token frequencies over a corpus (the tokenizer's added-token split, normalizer and pre-tokenizer)."""

    counts: Counter
    units: int
    chars: int


class Pretokens(Stat):
    """:func:`analysis.bpe.words.count_pretokens` over the corpus (options `sp_chunks`, `nfkc`)."""

    name = "pretokens"
    result = "Counter pre-token → frequency"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """Defaults: no SentencePiece chunking, no NFKC (the arguments of count_pretokens)."""
        out = {"sp_chunks": bool(opts.get("sp_chunks", False)), "nfkc": bool(opts.get("nfkc", False))}
        return {**out, **memory_options(opts)}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """count_pretokens over chunks of units; spill when the counter grows past MAX_KEYS."""
        counter = words.PretokenCounter(tok, sp_chunks=opts["sp_chunks"], nfkc=opts["nfkc"])
        _count_bounded(counter, (d.text for d in docs), opts, emit)
        return {"units": counter.units, "chars": counter.chars}

    def bucket(self, key: Any, k: int) -> int:
        """By the pre-token string."""
        return word_bucket(key, k)

    def buckets(self, keys: Sequence[Any], k: int) -> np.ndarray:
        """By the pre-token strings, in one pass."""
        return word_buckets(keys, k)

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """A PretokenCounts."""
        return PretokenCounts(counts, int(totals.get("units", 0)), int(totals.get("chars", 0)))


@memoize(maxsize=1)
def _with_characters(tok: LoadedTokenizer, chars: list[str]) -> LoadedTokenizer:
    return training.with_characters(tok, chars)


class Words(Stat):
    """Continued-training words, as :func:`analysis.bpe.training.continue_training` collects them.

    Byte-level and pre-tokenized modes: pre-token counts, segmented per bucket by the base model. SentencePiece
    mode: ``▁``-chunked NFKC pre-tokens plus a character histogram; each bucket is segmented by the base with
    the coverage characters added (those depend on `n_new`, which is then part of the options), then cut
    into SentencePiece groups.
    """

    name = "words"
    result = "TrainingWords (the trainer's word Counter)"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """Mode from the tokenizer; `nfkc` (default True), `coverage` and `n_new` (SentencePiece mode)."""
        mode = training.training_mode(tok)
        out = {"mode": mode}
        if mode == "sentencepiece":
            if not training._sp_chunkable(tok):
                raise UnsupportedTokenizerError(
                    f"{tok.name}: vocabulary pieces hold '▁' after another character, so words cannot be "
                    "counted shard by shard; train in one process (analysis.bpe.training.continue_training)"
                )
            cov = opts.get("coverage", training.SP_CHARACTER_COVERAGE)
            out["nfkc"] = bool(opts.get("nfkc", True))
            out["coverage"] = float(cov) if cov else None
            if out["coverage"]:
                n_new = opts.get("n_new")
                if not n_new or int(n_new) <= 0:
                    raise DataError(
                        "SentencePiece-mode words need n_new (the coverage characters count toward it)"
                    )
                out["n_new"] = int(n_new)
        return {**out, **memory_options(opts)}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """count_pretokens (+ the character histogram in SentencePiece mode) over chunks of units."""
        sp = opts["mode"] == "sentencepiece"
        nfkc = bool(opts.get("nfkc")) if sp else False
        hist: Counter = Counter()
        counter = words.PretokenCounter(tok, sp_chunks=sp, nfkc=nfkc)
        on_chunk = (
            (lambda chunk: hist.update(training.char_counts(chunk, nfkc)))
            if sp and opts.get("coverage")
            else None
        )
        _count_bounded(counter, (d.text for d in docs), opts, emit, on_chunk)
        out: dict[str, Any] = {"units": counter.units, "chars": counter.chars}
        if hist:
            out["histogram"] = dict(hist)
        return out

    def bucket(self, key: Any, k: int) -> int:
        """By the pre-token string."""
        return word_bucket(key, k)

    def buckets(self, keys: Sequence[Any], k: int) -> np.ndarray:
        """By the pre-token strings, in one pass."""
        return word_buckets(keys, k)

    def symbols(self, tok: LoadedTokenizer, opts: dict) -> np.ndarray | None:
        """Byte-level and pre-tokenized modes: the reduced words are tuples of these vocabulary ids."""
        return None if opts["mode"] == "sentencepiece" else words.vocabulary_symbols(tok)

    def coverage_characters(self, tok: LoadedTokenizer, totals: dict, opts: dict) -> list[tuple[str, int]]:
        """The SentencePiece coverage characters (at most n_new), from the merged histogram."""
        if opts["mode"] != "sentencepiece" or not opts.get("coverage"):
            return []
        found = training.coverage_characters(tok, totals.get("histogram", {}), opts["coverage"])
        return found[: opts["n_new"]]

    def reduce(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Counter:
        """Segment the bucket's pre-tokens with the base model (SentencePiece: + coverage characters, groups)."""
        if opts["mode"] != "sentencepiece":  # as vocabulary ids: compact between the stages (see `symbols`)
            return words.segment_ids(tok, counts)
        chars = [ch for ch, _ in self.coverage_characters(tok, totals, opts)]
        work = _with_characters(tok, chars)
        return training.sp_groups(work, words.segment_words(work, counts))

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """A TrainingWords (words keyed by vocabulary ids, as this process's reduce leaves them, are turned into
        the vocabulary's strings; a corpus job's finalize reads them as strings through :meth:`symbols`)."""
        first = next(iter(counts), ())
        if first and type(first[0]) is int:
            counts = words.words_from_ids(tok, counts)
        return TrainingWords(
            opts["mode"],
            counts,
            int(totals.get("units", 0)),
            int(totals.get("chars", 0)),
            self.coverage_characters(tok, totals, opts),
        )


def train_from_words(
    tok: LoadedTokenizer,
    tw: TrainingWords,
    n_new: int,
    *,
    max_token_length: int | None = None,
    min_frequency: int = 0,
) -> training.TrainingResult:
    """Continued training from counted words: :func:`analysis.bpe.training.train_from_counts`, the second half of
    :func:`analysis.bpe.training.continue_training` (the merge loop on one machine)."""
    return training.train_from_counts(
        tok, tw, n_new, max_token_length=max_token_length, min_frequency=min_frequency
    )


# --------------------------------------------------------------------------------------------------
# Token-id counts
# --------------------------------------------------------------------------------------------------
class ProducedIds(Stat):
    """:func:`analysis.bpe.stt.corpus_token_counts` (the tokenizer's own flags, no specials) → Counter."""

    name = "produced-ids"
    result = "Counter id → occurrences"

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """corpus_token_counts over chunks of units."""
        acc: Counter = Counter()
        units = 0
        for chunk in chunks((d.text for d in docs), opts.get("chunk_units", CHUNK_UNITS)):
            acc.update(bpe.corpus_token_counts(tok, chunk))
            units += len(chunk)
        emit(acc)
        return {"units": units}

    def bucket(self, key: Any, k: int) -> int:
        """By the id."""
        return int(key) % k

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """The Counter of ids."""
        return Counter(counts)


# --------------------------------------------------------------------------------------------------
# Compression metrics per group
# --------------------------------------------------------------------------------------------------
#: How compression results are grouped: per file (its name without suffixes), parent folder, input value, or all.
GROUP_BY = ("file", "folder", "input", "all")


class Compression(Stat):
    """Compression metrics per group (file, input or the whole corpus) as :func:`analysis.measure.metrics.corpus_stats`."""

    name = "compression"
    result = "dict group → corpus_stats dict"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """`power` (Rényi α) and `group_by`: `file` (name without suffixes), `folder`, `input` or `all`."""
        power = float(opts.get("power", renyi.DEFAULT_POWER))
        if power <= 0:
            raise DataError("the Rényi power must be positive")
        group_by = opts.get("group_by", "file")
        if group_by not in GROUP_BY:
            raise DataError(f"group_by is one of {', '.join(GROUP_BY)}")
        return {"power": power, "group_by": group_by}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """Per group and chunk: encode_ids, text_counts, continued_words; keyed by (group, id)."""
        facts = corpus_counts.token_facts(tok)
        totals: dict[str, dict[str, int]] = {}
        acc: Counter = Counter()

        def flush(group: str, lines: list[str]) -> None:
            flat, lens = corpus_counts.encode_ids(tok, lines)
            tc = corpus_counts.text_counts(lines)
            if flat.size:
                facts.ensure(np.unique(flat))
            totals[group] = merge_globals(
                totals.get(group, {}), corpus_counts.chunk_totals(facts, flat, lens, tc)
            )
            if flat.size:
                bc = np.bincount(flat)
                nz = np.flatnonzero(bc)
                acc.update({(group, i): c for i, c in zip(nz.tolist(), bc[nz].tolist())})

        group = None
        buf: list[str] = []
        for d in docs:
            if d.group != group or len(buf) >= CHUNK_UNITS:
                if buf:
                    flush(group, buf)
                buf = []
                group = d.group
            if d.text:
                buf.append(d.text)
        if buf:
            flush(group, buf)
        emit(acc)
        return {"groups": totals}

    def bucket(self, key: Any, k: int) -> int:
        """By the id."""
        return int(key[1]) % k

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """Per group, the metrics of corpus_stats from the summed id counts and totals."""
        per: dict[str, dict[int, int]] = {}
        for (g, i), c in counts.items():
            per.setdefault(g, {})[i] = c
        out = {}
        for g in sorted(totals.get("groups", {})):
            out[g] = _group_stats(tok, per.get(g, {}), totals["groups"][g], opts["power"])
        if not out:
            raise DataError("no non-empty lines to measure")
        return out


def _group_stats(tok: LoadedTokenizer, id_counts: dict[int, int], t: dict, power: float) -> dict[str, Any]:
    """:func:`analysis.measure.metrics.stats_from_counts` of one group's summed id counts and totals."""
    size = max(tok.vocab_size, max(id_counts) + 1 if id_counts else 0)
    counts = np.zeros(size, dtype=np.int64)
    if id_counts:
        ids = np.fromiter(id_counts.keys(), dtype=np.int64, count=len(id_counts))
        counts[ids] = np.fromiter(id_counts.values(), dtype=np.int64, count=len(id_counts))
    return metrics.stats_from_counts(tok, counts, t, power)


#: The engine's own statistics, by name.
_ENGINE: dict[str, Stat] = {s.name: s for s in (Pretokens(), Words(), ProducedIds(), Compression())}
#: The statistics paper methods contribute, name → "module:class": the one registry through which a method plugs
#: into corpus jobs. The class is imported on first use, so the job engine itself imports no method.
PLUGINS: dict[str, str] = {
    "token-ids": "analysis.methods.pruning.corpus:TokenIds",
    "merge-counts": "analysis.methods.pruning.corpus:MergeCounts",
    "source-words": "analysis.methods.sabpe.corpus:SourceWordCounts",
}


@memoize(maxsize=len(PLUGINS))
def _plugged(module: str, cls: str) -> Stat:
    """The plugged-in statistic `cls` of `module`, imported and made once per process."""
    return getattr(importlib.import_module(module), cls)()


#: Every statistic's name.
STATS: tuple[str, ...] = (*_ENGINE, *PLUGINS)


def get_stat(name: str) -> Stat:
    """The statistic called `name` (DataError listing the choices otherwise)."""
    if name in _ENGINE:
        return _ENGINE[name]
    where = PLUGINS.get(name)
    if where is None:
        raise DataError(f"unknown corpus statistic {name!r}; choose one of {', '.join(STATS)}")
    module, cls = where.split(":")
    return _plugged(module, cls)
