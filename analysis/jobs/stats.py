"""The corpus statistics, each split into map (per shard group), bucket reduce and finalize.

Every statistic runs the project's existing per-text function in its map stage and only adds up what that
function returns, so a map over any partition of the corpus followed by the reduce gives exactly the
single-process result:

==================  ==================================================  ==========================================
statistic           map (per task, existing function)                   reduce / finalize
==================  ==================================================  ==========================================
``pretokens``       :func:`analysis.bpe.training.count_pretokens`           sum → Counter of pre-tokens
``words``           ``count_pretokens`` (SentencePiece mode: ``▁``      sum; segment each bucket with
                    chunks, NFKC) + character counts                    :func:`~analysis.bpe.training.segment_words`
                                                                        (+ :func:`~analysis.bpe.training.sp_groups`
                                                                        after the coverage characters) → the
                                                                        trainer's word Counter
``token-ids``       :func:`analysis.methods.pruning.token_counts`               sum → id count vector (pruning orders)
``produced-ids``    :func:`analysis.bpe.stt.corpus_token_counts`   sum → Counter (never-produced tokens)
``merge-counts``    :func:`analysis.methods.pruning.merge_counts`               sum → (token Counter, merge Counter)
                                                                        for the merge-based pruning order
``compression``     :func:`analysis.measure.metrics.encode_ids`,                per group: sum of token-id counts and
                    ``text_counts``, ``continued_words``                additive totals, then the metrics of
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

import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis import bpe
from analysis.bpe import training
from analysis.bpe.training import TrainingWords
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.measure import metrics
from analysis.methods import pruning
from analysis.methods.sabpe import sabpe
from analysis.texts.code import CodeRecord
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


def word_bucket(word: str, k: int) -> int:
    """The bucket of a word: CRC-32 of its UTF-8 bytes modulo k (the same in every process)."""
    return zlib.crc32(word.encode("utf-8", "surrogatepass")) % k


def _chunks(it: Iterable[Any], n: int) -> Iterator[list[Any]]:
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

    def reduce(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Counter:
        """Post-process one bucket's summed counts (e.g. segment the words); default: unchanged."""
        return counts

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """Turn the summed counts of every bucket and the totals into the consumer's input."""
        raise NotImplementedError


def _memory_options(opts: dict) -> dict:
    """The map's memory knobs when given: `max_keys` (spill threshold), `chunk_units` (units per call)."""
    out = {}
    for k in ("max_keys", "chunk_units"):
        if opts.get(k) is not None:
            v = int(opts[k])
            if v < 1:
                raise DataError(f"{k} must be positive")
            out[k] = v
    return out


def _emit_bounded(counter: Counter, emit: Emit, max_keys: int) -> Counter:
    if len(counter) >= max_keys:
        emit(counter)
        return Counter()
    return counter


# --------------------------------------------------------------------------------------------------
# Pre-token counts and training words
# --------------------------------------------------------------------------------------------------
@dataclass
class PretokenCounts:
    """Pre-token frequencies over a corpus (the tokenizer's added-token split, normalizer and pre-tokenizer)."""

    counts: Counter
    units: int
    chars: int


class Pretokens(Stat):
    """:func:`analysis.bpe.training.count_pretokens` over the corpus (options `sp_chunks`, `nfkc`)."""

    name = "pretokens"
    result = "Counter pre-token → frequency"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """Defaults: no SentencePiece chunking, no NFKC (the arguments of count_pretokens)."""
        out = {"sp_chunks": bool(opts.get("sp_chunks", False)), "nfkc": bool(opts.get("nfkc", False))}
        return {**out, **_memory_options(opts)}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """count_pretokens over chunks of units; spill when the counter grows past MAX_KEYS."""
        acc: Counter = Counter()
        units = chars = 0
        for chunk in _chunks((d.text for d in docs), opts.get("chunk_units", CHUNK_UNITS)):
            c, n, ch = training.count_pretokens(tok, chunk, sp_chunks=opts["sp_chunks"], nfkc=opts["nfkc"])
            acc.update(c)
            units += n
            chars += ch
            acc = _emit_bounded(acc, emit, opts.get("max_keys", MAX_KEYS))
        emit(acc)
        return {"units": units, "chars": chars}

    def bucket(self, key: Any, k: int) -> int:
        """By the pre-token string."""
        return word_bucket(key, k)

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """A PretokenCounts."""
        return PretokenCounts(counts, int(totals.get("units", 0)), int(totals.get("chars", 0)))


_WORK: dict[tuple[str, tuple[str, ...]], LoadedTokenizer] = {}


def _with_characters(tok: LoadedTokenizer, chars: list[str]) -> LoadedTokenizer:
    key = (tok.content_hash, tuple(chars))
    w = _WORK.get(key)
    if w is None:
        _WORK.clear()
        w = _WORK[key] = training.with_characters(tok, chars)
    return w


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
        return {**out, **_memory_options(opts)}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """count_pretokens (+ the character histogram in SentencePiece mode) over chunks of units."""
        sp = opts["mode"] == "sentencepiece"
        nfkc = bool(opts.get("nfkc")) if sp else False
        hist: Counter = Counter()
        acc: Counter = Counter()
        units = chars = 0
        for chunk in _chunks((d.text for d in docs), opts.get("chunk_units", CHUNK_UNITS)):
            if sp and opts.get("coverage"):
                hist.update(training.char_counts(chunk, nfkc))
            c, n, ch = training.count_pretokens(tok, chunk, sp_chunks=sp, nfkc=nfkc)
            acc.update(c)
            units += n
            chars += ch
            acc = _emit_bounded(acc, emit, opts.get("max_keys", MAX_KEYS))
        emit(acc)
        out: dict[str, Any] = {"units": units, "chars": chars}
        if hist:
            out["histogram"] = dict(hist)
        return out

    def bucket(self, key: Any, k: int) -> int:
        """By the pre-token string."""
        return word_bucket(key, k)

    def coverage_characters(self, tok: LoadedTokenizer, totals: dict, opts: dict) -> list[tuple[str, int]]:
        """The SentencePiece coverage characters (at most n_new), from the merged histogram."""
        if opts["mode"] != "sentencepiece" or not opts.get("coverage"):
            return []
        found = training.coverage_characters(tok, totals.get("histogram", {}), opts["coverage"])
        return found[: opts["n_new"]]

    def reduce(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Counter:
        """Segment the bucket's pre-tokens with the base model (SentencePiece: + coverage characters, groups)."""
        if opts["mode"] != "sentencepiece":
            return training.segment_words(tok, counts)
        chars = [ch for ch, _ in self.coverage_characters(tok, totals, opts)]
        work = _with_characters(tok, chars)
        return training.sp_groups(work, training.segment_words(work, counts))

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """A TrainingWords."""
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
class TokenIds(Stat):
    """:func:`analysis.methods.pruning.token_counts` (specials added, merges always applied) → id count vector."""

    name = "token-ids"
    result = "numpy int64 vector (index = id)"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """`add_special_tokens` (default True, as pruning counts)."""
        return {"add_special_tokens": bool(opts.get("add_special_tokens", True))}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """token_counts over chunks of units."""
        acc: Counter = Counter()
        units = 0
        for chunk in _chunks((d.text for d in docs), CHUNK_ENCODE):
            v = pruning.token_counts(tok, chunk, add_special_tokens=opts["add_special_tokens"])
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


class ProducedIds(Stat):
    """:func:`analysis.bpe.stt.corpus_token_counts` (the tokenizer's own flags, no specials) → Counter."""

    name = "produced-ids"
    result = "Counter id → occurrences"

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """corpus_token_counts over chunks of units."""
        acc: Counter = Counter()
        units = 0
        for chunk in _chunks((d.text for d in docs), opts.get("chunk_units", CHUNK_UNITS)):
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


class MergeCounts(Stat):
    """:func:`analysis.methods.pruning.merge_counts` (final tokens and merge events of the BPE replay) → two Counters.

    Keys: ``(0, id)`` for final-token counts, ``(1, left_id, right_id)`` for merge counts (the merge-based
    pruning order).
    """

    name = "merge-counts"
    result = "(Counter id → final count, Counter (left, right) → merge count)"

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """merge_counts over chunks of units."""
        acc: Counter = Counter()
        units = 0
        for chunk in _chunks((d.text for d in docs), opts.get("chunk_units", CHUNK_UNITS)):
            tcounts, mcounts = pruning.merge_counts(tok, chunk)
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
        power = float(opts.get("power", metrics.DEFAULT_POWER))
        if power <= 0:
            raise DataError("the Rényi power must be positive")
        group_by = opts.get("group_by", "file")
        if group_by not in GROUP_BY:
            raise DataError(f"group_by is one of {', '.join(GROUP_BY)}")
        return {"power": power, "group_by": group_by}

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """Per group and chunk: encode_ids, text_counts, continued_words; keyed by (group, id)."""
        facts = metrics.token_facts(tok)
        totals: dict[str, dict[str, int]] = {}
        acc: Counter = Counter()

        def flush(group: str, lines: list[str]) -> None:
            flat, lens = metrics.encode_ids(tok, lines)
            tc = metrics.text_counts(lines)
            if flat.size:
                facts.ensure(np.unique(flat))
            totals[group] = merge_globals(totals.get(group, {}), metrics.chunk_totals(facts, flat, lens, tc))
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


# --------------------------------------------------------------------------------------------------
# SA-BPE per-source word counts
# --------------------------------------------------------------------------------------------------
class SourceWordCounts(Stat):
    """:func:`analysis.methods.sabpe.sabpe.collect_words` per chunk of records → counts per (word, repository), (word, language).

    Options `languages` (file stems kept), `max_files_per_repo`, `max_bytes_per_repo` (per file, as read_code).
    """

    name = "source-words"
    layout = "code"
    result = "analysis.methods.sabpe.sabpe.SourceWords"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """Check the base is byte-level; keep the record options."""
        sabpe.require_byte_level(tok)
        langs = opts.get("languages")
        return {
            "languages": sorted(langs) if langs else None,
            "max_files_per_repo": opts.get("max_files_per_repo"),
            "max_bytes_per_repo": opts.get("max_bytes_per_repo"),
        }

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """collect_words per chunk of records; first-seen order of repositories and languages per shard."""
        acc: Counter = Counter()
        n_records = n_bytes = 0
        first: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
        for chunk in _chunks(docs, CHUNK_RECORDS):
            recs = []
            for d in chunk:
                recs.append(CodeRecord(d.repo, d.language, d.path, d.text))
                repos, langs = first.setdefault(str(d.shard), ({}, {}))
                repos.setdefault(d.repo)
                langs.setdefault(d.language)
            sw = sabpe.collect_words(tok, recs)
            n_records += sw.n_records
            n_bytes += sw.n_bytes
            for w, (rids, rcs), (lids, lcs) in zip(sw.words, sw.repo_dist, sw.lang_dist):
                for r, c in zip(rids, rcs):
                    acc[(w, 0, sw.repos[r])] += c
                for g, c in zip(lids, lcs):
                    acc[(w, 1, sw.languages[g])] += c
        emit(acc)
        seen = {s: {"repos": list(r), "languages": list(g)} for s, (r, g) in first.items()}
        return {"records": n_records, "bytes": n_bytes, "first_seen": seen}

    def bucket(self, key: Any, k: int) -> int:
        """By the word."""
        return word_bucket(key[0], k)

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """A SourceWords: words sorted, repositories and languages in first-seen order of the shard list."""
        if not totals.get("records"):
            raise DataError("the selected code corpus has no records with text")
        repos: list[str] = []
        langs: list[str] = []
        first = totals.get("first_seen", {})
        for s in sorted(first, key=int):
            for r in first[s]["repos"]:
                if r not in repos:
                    repos.append(r)
            for g in first[s]["languages"]:
                if g not in langs:
                    langs.append(g)
        r_ix = {r: i for i, r in enumerate(repos)}
        g_ix = {g: i for i, g in enumerate(langs)}
        by_repo: dict[str, dict[int, int]] = {}
        by_lang: dict[str, dict[int, int]] = {}
        for (w, kind, src), c in counts.items():
            if kind == 0:
                by_repo.setdefault(w, {})[r_ix[src]] = c
            else:
                by_lang.setdefault(w, {})[g_ix[src]] = c
        words = sorted(by_repo)
        freqs, rd, ld = [], [], []
        for w in words:
            d = dict(sorted(by_repo[w].items()))
            e = dict(sorted(by_lang[w].items()))
            freqs.append(sum(d.values()))
            rd.append((tuple(d), tuple(d.values())))
            ld.append((tuple(e), tuple(e.values())))
        return sabpe.SourceWords(
            words, freqs, rd, ld, repos, langs, int(totals["records"]), int(totals["bytes"])
        )


#: Every statistic by name.
STATS: dict[str, Stat] = {
    s.name: s
    for s in (
        Pretokens(),
        Words(),
        TokenIds(),
        ProducedIds(),
        MergeCounts(),
        Compression(),
        SourceWordCounts(),
    )
}


def get_stat(name: str) -> Stat:
    """The statistic called `name` (DataError listing the choices otherwise)."""
    s = STATS.get(name)
    if s is None:
        raise DataError(f"unknown corpus statistic {name!r}; choose one of {', '.join(STATS)}")
    return s
