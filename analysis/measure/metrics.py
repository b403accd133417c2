"""Corpus-level compression metrics and cross-language summaries, as Purason, Chizhov, Yamshchikov, Fishel,
"Teaching Old Tokenizers New Words" (arXiv 2512.03989, 2025; "Purason et al." below) measure them (§4.2).

Why one file (about 900 lines): the metric registry, the one corpus formula and the tokenizer × language table
share one row schema and one content-keyed cache; the cross-language summaries (Gini, per script, Δrel, LaTeX)
read those rows.

Every metric is corpus-level: sums over sentences, then one ratio (never a mean of per-sentence ratios).
Texts are encoded with ``tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)`` (Rust, parallel; the
ids of ``encode_batch`` without its character offsets, 20–30 % faster), so no BOS/EOS tokens are counted, and ignore_merges is used exactly as the tokenizer has it.

Per tokenizer × language (:func:`corpus_stats`):

* ``bytes_per_token`` (BPT) = Σ UTF-8 bytes / Σ tokens; ``chars_per_token``; ``tokens_per_sentence``;
* ``fertility`` = Σ tokens / Σ whitespace words (``len(line.split())``), ``tokens_per_char`` as the
  character-based alternative for scripts written without spaces (flagged by ``spaceless``);
* ``renyi_efficiency`` = H_α(p) / log2 V over token ids (α = 2.5 by default, V = the tokenizer's vocabulary
  size) and ``renyi_efficiency_observed`` (V = number of observed types, tokenization-scorer's default);
* ``distinct_tokens``, ``mean_token_length`` (characters per distinct token type used), ``byte_fallback_rate``
  (share of byte-fallback tokens: `<0xNN>` pieces, or single non-ASCII bytes in byte-level vocabularies —
  the ASCII single-byte tokens such as "." are ordinary characters and are not counted), ``partial_char_rate`` (share of tokens that are not
  whole UTF-8 characters), ``unk_rate``, ``continued_words`` (share of words split into ≥ 2 tokens, words
  delimited by the tokenizer's own word-start marks: a leading space/▁ or a non-``##`` WordPiece token).

Across languages: :func:`gini`, :func:`summarize`, :func:`script_summary` (Purason et al., Table 2) and
:func:`compare` (Δrel and win rate, Purason et al., Table 1). :func:`compression_table` runs a tokenizer ×
language grid with a JSON cache keyed by tokenizer content hash + data hash + metric parameters.
"""

from __future__ import annotations

import base64
import csv
import io
import itertools
import math
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.core.cache import DiskCache, SingleFlight, memoize
from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.texts.flores import language
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Bumped whenever a metric definition changes (part of every cache key).
METRICS_VERSION = 7
DEFAULT_POWER = 2.5
#: Rényi vocabulary modes: the tokenizer's vocabulary size, or the number of observed token types.
VOCAB_MODES = ("tokenizer", "observed")
#: Script groups of Purason et al., Table 2 (everything else is "Other").
TABLE2_GROUPS = ("Latn", "Cyrl", "Arab", "Jpan", "Hani")


# --------------------------------------------------------------------------------------------------
# Rényi efficiency (tokenization-scorer definition, on any hashable tokens or id counts)
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Per-id facts of a tokenizer (built once per content hash)
# --------------------------------------------------------------------------------------------------
class TokenFacts:
    """Per-id facts of one tokenizer, filled lazily for the ids actually seen (vectorises per-token metrics).

    Arrays are indexed by token id: `word_start` (the token begins a new word: leading whitespace/▁, or a
    WordPiece piece without `##`), `space_only` (only whitespace; its successor starts a word), `byte_piece`
    (a byte-fallback token: `<0xNN>` in SentencePiece vocabularies, a single non-ASCII byte in byte-level
    ones), `partial` (not whole UTF-8 characters on its own), `length` (characters of the readable form).
    """

    def __init__(self, tok: LoadedTokenizer) -> None:
        self._tok = tok
        self._rust = tok.tokenizer
        self.size = int(tok.vocab_size)
        self._alloc(self.size)
        self._added = tok.added_ids
        self._wordpiece = tok.model_type == "WordPiece"
        self._prefix = tok.continuing_subword_prefix or "##"
        self._byte_level = tok.is_byte_level
        self._lock = threading.Lock()
        unk = tok.unk_token
        if tok.model_type == "Unigram":
            uid = tok.model.get("unk_id")
            self.unk_id = -1 if uid is None else int(uid)
        else:
            uid = self._rust.token_to_id(unk) if unk else None
            self.unk_id = -1 if uid is None else int(uid)

    def _alloc(self, n: int) -> None:
        old = getattr(self, "known", None)
        arrays = {
            "known": bool,
            "word_start": bool,
            "space_only": bool,
            "punct": bool,
            "byte_piece": bool,
            "partial": bool,
            "length": np.int32,
        }
        for name, dt in arrays.items():
            a = np.zeros(n, dtype=dt)
            if old is not None:
                prev = getattr(self, name)
                a[: prev.size] = prev
            setattr(self, name, a)
        self.size = n

    def ensure(self, ids: np.ndarray) -> None:
        """Compute the facts of every id in `ids` not seen before."""
        if ids.size == 0:
            return
        with self._lock:
            top = int(ids.max()) + 1
            if top > self.size:
                self._alloc(top)
            todo = ids[~self.known[ids]]
            for i in np.unique(todo).tolist():
                self._fill(i)

    def _fill(self, i: int) -> None:
        raw = self._rust.id_to_token(i)
        self.known[i] = True
        if raw is None:
            return
        tok = self._tok
        if i in self._added:
            self.word_start[i] = True
            self.length[i] = len(raw)
            return
        bs = tok.token_bytes(raw)
        try:
            text = bs.decode("utf-8")
            partial = False
        except UnicodeDecodeError:
            text = bs.decode("utf-8", errors="ignore")
            partial = True
        self.partial[i] = partial
        # characters; a stray byte run counts as one (the count only, nothing is displayed)
        self.length[i] = len(bs.decode("utf-8", errors="replace")) if partial else len(text)
        if self._wordpiece:
            self.word_start[i] = not raw.startswith(self._prefix)
        else:
            self.word_start[i] = bool(bs) and bs[:1].isspace()
        self.space_only[i] = bool(bs) and bs.isspace()
        core = text.strip()
        self.punct[i] = bool(core) and not partial and all(unicodedata.category(ch)[0] in "PS" for ch in core)
        if self._byte_level:
            self.byte_piece[i] = len(raw) == 1 and len(bs) == 1 and bs[0] >= 0x80
        else:
            self.byte_piece[i] = tok.is_byte_piece(raw)


@memoize(maxsize=16)
def token_facts(tok: LoadedTokenizer) -> TokenFacts:
    """The lazily filled per-id facts of a tokenizer (cached by content hash, at most 16 kept)."""
    return TokenFacts(tok)


# --------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------
def _rust_tokenizer(tok: LoadedTokenizer):
    """The tokenizer to encode with: the shared one, or a private copy with BPE dropout switched off."""
    if tok.dropout:
        t = tok.fresh_tokenizer()
        t.model.dropout = 0.0
        return t
    return tok.tokenizer


def encode_ids(tok: LoadedTokenizer, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode lines without special tokens; return (flat token ids, tokens per line) as int64 arrays."""
    enc = _rust_tokenizer(tok).encode_batch_fast(list(lines), add_special_tokens=False)
    ids = [e.ids for e in enc]
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
    return flat, lens


def text_counts(lines: Sequence[str]) -> dict[str, Any]:
    """Per-line bytes, characters and whitespace words (int64 arrays) of a list of lines."""
    n = len(lines)
    return {
        "bytes": np.fromiter((len(s.encode("utf-8")) for s in lines), dtype=np.int64, count=n),
        "chars": np.fromiter(map(len, lines), dtype=np.int64, count=n),
        "words": np.fromiter((len(s.split()) for s in lines), dtype=np.int64, count=n),
    }


#: A whitespace "word" longer than this many characters on average means the script is written without
#: spaces (zh/ja/th/lo/km/my/bo...), where fertility per whitespace word is meaningless.
SPACELESS_CHARS_PER_WORD = 12.0


def continued_words(facts: TokenFacts, flat: np.ndarray, lens: np.ndarray) -> tuple[int, int]:
    """(words, words split into ≥ 2 tokens).

    Words are delimited by the tokenizer's word-start marks (leading space/▁, non-`##` WordPiece pieces), and
    punctuation/symbol-only tokens count as words of their own, as in the UD treebanks of Rust et al. (2021).
    """
    if flat.size == 0:
        return 0, 0
    line_start = np.zeros(flat.size, dtype=bool)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    line_start[starts[lens > 0]] = True
    space_only = facts.space_only[flat]
    after_space = np.zeros(flat.size, dtype=bool)
    after_space[1:] = space_only[:-1] & ~line_start[1:]
    # punctuation/symbol-only tokens are words of their own (as in UD treebanks, Rust et al. 2021)
    punct = facts.punct[flat]
    after_punct = np.zeros(flat.size, dtype=bool)
    after_punct[1:] = punct[:-1]
    start = (facts.word_start[flat] | line_start | after_space | punct | after_punct) & ~space_only
    keep = ~space_only
    s = start[keep]
    if s.size == 0:
        return 0, 0
    pos = np.flatnonzero(s)
    if pos.size == 0 or pos[0] != 0:
        pos = np.concatenate(([0], pos))
    seg = np.diff(np.concatenate((pos, [s.size])))
    return int(seg.size), int((seg >= 2).sum())


def corpus_stats(
    tok: LoadedTokenizer,
    lines: Sequence[str],
    *,
    power: float = DEFAULT_POWER,
    per_sentence: bool = False,
) -> dict[str, Any]:
    """All corpus-level metrics of one tokenizer on a list of lines (no special tokens; sums, then ratios).

    Keys: sentences, tokens, bytes, chars, words, bytes_per_token, chars_per_token, tokens_per_sentence,
    fertility, tokens_per_char, spaceless, renyi_efficiency, renyi_efficiency_observed, distinct_tokens,
    mean_token_length, byte_fallback_rate, partial_char_rate, unk_rate, continued_words, power.
    With per_sentence=True also `sentence_tokens` and `sentence_bytes` (lists).
    """
    lines = [s for s in lines if s]
    if not lines:
        raise DataError("no non-empty lines to measure")
    flat, lens = encode_ids(tok, lines)
    tc = text_counts(lines)
    out = _stats_from(tok, flat, lens, tc, power)
    if per_sentence:
        out["sentence_tokens"] = lens.tolist()
        out["sentence_bytes"] = tc["bytes"].tolist()
    return out


def _stats_from(
    tok: LoadedTokenizer, flat: np.ndarray, lens: np.ndarray, tc: dict[str, np.ndarray], power: float
) -> dict[str, Any]:
    facts = token_facts(tok)
    n_tok = int(flat.size)
    size = max(facts.size, int(flat.max()) + 1 if n_tok else 0)
    counts = np.bincount(flat, minlength=size) if n_tok else np.zeros(size, dtype=np.int64)
    facts.ensure(np.flatnonzero(counts))
    return stats_from_counts(tok, counts, chunk_totals(facts, flat, lens, tc), power)


def chunk_totals(
    facts: TokenFacts, flat: np.ndarray, lens: np.ndarray, tc: dict[str, np.ndarray]
) -> dict[str, int]:
    """The additive totals of one chunk of lines (:func:`encode_ids` and :func:`text_counts` of the lines): the
    one place a total is counted, for the in-process path and every map task of a corpus job (which add them
    up). Keys: :data:`TOTALS`."""
    n_words_tok, n_cont = continued_words(facts, flat, lens)
    return {
        "sentences": int(lens.size),
        "tokens": int(flat.size),
        "bytes": int(tc["bytes"].sum()),
        "chars": int(tc["chars"].sum()),
        "words": int(tc["words"].sum()),
        "words_tok": n_words_tok,
        "continued": n_cont,
    }


#: The additive totals :func:`stats_from_counts` turns into metrics (every one a sum over sentences).
TOTALS = ("sentences", "tokens", "bytes", "chars", "words", "words_tok", "continued")


@dataclass(frozen=True)
class Sums:
    """What a metric's formula reads: the corpus totals and the id counts (with per-token facts)."""

    sentences: int
    tokens: int
    bytes: int
    chars: int
    words: int
    words_tok: int
    continued: int
    counts: np.ndarray
    used: np.ndarray
    used_counts: np.ndarray
    facts: TokenFacts
    power: float
    vocab_size: int


@dataclass(frozen=True)
class Metric:
    """One compression metric: its name (the row key), the page's label, whether higher is better, and its formula
    over the corpus sums (None for `parity`, which compares a language with the reference language, computed in
    :func:`compression_table`, and for `tokens`, a total). `selectable`: offered as a metric to chart and rank
    (not a flag such as `spaceless`)."""

    name: str
    label: str
    higher_is_better: bool
    formula: Callable[[Sums], Any] | None
    selectable: bool = True


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def _share(s: Sums, mask: np.ndarray) -> float:
    return float(int(s.used_counts[mask].sum()) / s.tokens) if s.tokens else 0.0


def _unk_rate(s: Sums) -> float:
    unk = s.facts.unk_id
    return float(int(s.counts[unk]) / s.tokens) if s.tokens and 0 <= unk < s.counts.size else 0.0


def _mean_length(s: Sums) -> float:
    lengths = s.facts.length[s.used]
    return float(lengths.mean()) if lengths.size else float("nan")


#: The metric registry, in the order of a compression row. Adding a metric: one entry here (and its test); the
#: rows, the CLI's JSON/CSV, the corpus jobs and the Compression page follow.
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("bytes_per_token", "bytes / token", True, lambda s: _ratio(s.bytes, s.tokens)),
        Metric("chars_per_token", "chars / token", True, lambda s: _ratio(s.chars, s.tokens)),
        Metric("tokens_per_sentence", "tokens / sentence", False, lambda s: _ratio(s.tokens, s.sentences)),
        Metric(
            "fertility", "fertility (tokens / whitespace word)", False, lambda s: _ratio(s.tokens, s.words)
        ),
        Metric(
            "tokens_per_char",
            "tokens / char (for scripts without spaces)",
            False,
            lambda s: _ratio(s.tokens, s.chars),
        ),
        Metric(
            "spaceless",
            "written without spaces",
            False,
            lambda s: bool(s.words == 0 or s.chars / s.words > SPACELESS_CHARS_PER_WORD),
            selectable=False,
        ),
        Metric("parity", "parity (premium vs English)", False, None),
        Metric("parity_corpus", "parity (Σ tokens / Σ English tokens)", False, None),
        Metric(
            "renyi_efficiency",
            "Rényi efficiency",
            True,
            lambda s: renyi_efficiency_from_counts(s.used_counts, s.power, s.vocab_size),
        ),
        Metric(
            "renyi_efficiency_observed",
            "Rényi efficiency (observed types)",
            True,
            lambda s: renyi_efficiency_from_counts(s.used_counts, s.power, None),
        ),
        Metric("distinct_tokens", "distinct tokens used", True, lambda s: int(s.used.size)),
        Metric("mean_token_length", "mean token length (chars, per type)", True, _mean_length),
        Metric(
            "byte_fallback_rate", "byte-fallback rate", False, lambda s: _share(s, s.facts.byte_piece[s.used])
        ),
        Metric(
            "partial_char_rate",
            "partial-character token rate",
            False,
            lambda s: _share(s, s.facts.partial[s.used]),
        ),
        Metric("unk_rate", "unk rate", False, _unk_rate),
        Metric("continued_words", "continued words", False, lambda s: _ratio(s.continued, s.words_tok)),
        Metric("tokens", "tokens", False, None),
    )
}
#: The metrics to chart, rank and compare, with the page's labels (every registered metric but the flags).
METRIC_LABELS = {n: m.label for n, m in METRICS.items() if m.selectable}
#: Whether higher is better, per selectable metric (charts, summaries, win rates).
HIGHER_IS_BETTER = {n: m.higher_is_better for n, m in METRICS.items() if m.selectable}


def stats_from_counts(
    tok: LoadedTokenizer, counts: np.ndarray, totals: dict[str, int], power: float = DEFAULT_POWER
) -> dict[str, Any]:
    """The metrics of :func:`corpus_stats` from an id count vector (index = id) and additive totals.

    `totals` holds the sums of :data:`TOTALS`: sentences, tokens, UTF-8 bytes, characters, whitespace words,
    words as the tokenizer marks them and those split into ≥ 2 tokens (:func:`continued_words`). Every metric
    is a ratio of sums, so counts and totals added up over any partition of a corpus (files, shards, map tasks)
    give exactly the metrics of the whole — the one formula (:data:`METRICS`) of the in-process and the
    distributed paths.
    """
    facts = token_facts(tok)
    counts = np.asarray(counts, dtype=np.int64)
    used = np.flatnonzero(counts)
    facts.ensure(used)
    s = Sums(
        **{k: int(totals[k]) for k in TOTALS},
        counts=counts,
        used=used,
        used_counts=counts[used],
        facts=facts,
        power=power,
        vocab_size=tok.vocab_size,
    )
    out: dict[str, Any] = {k: int(totals[k]) for k in ("sentences", "tokens", "bytes", "chars", "words")}
    out.update({m.name: m.formula(s) for m in METRICS.values() if m.formula is not None})
    out["power"] = power
    return out


def bytes_per_token(tok: LoadedTokenizer, lines: Sequence[str]) -> float:
    """Corpus-level UTF-8 bytes per token (Σ bytes / Σ tokens, no special tokens, empty lines skipped)."""
    lines = [s for s in lines if s]
    if not lines:
        raise DataError("no non-empty lines to measure")
    enc = _rust_tokenizer(tok).encode_batch_fast(lines, add_special_tokens=False)
    n_tok = sum(len(e.ids) for e in enc)
    n_bytes = sum(len(s.encode("utf-8")) for s in lines)
    return n_bytes / n_tok if n_tok else float("nan")


# --------------------------------------------------------------------------------------------------
# Tokenizer × language grid with a JSON cache
# --------------------------------------------------------------------------------------------------
#: Columns of a compression row, in display order: the language, every registered metric, the totals, the keys.
ROW_COLUMNS = [
    "tokenizer", "lang", "name", "script", "family", *METRICS,
    "bytes", "chars", "words", "sentences", "power", "tokenizer_hash", "data_hash",
]  # fmt: skip

#: per-language results in memory (LRU, bounded), on disk one document per (tokenizer, parameters), which every
#: process on the cache adds to (a server, a CLI run, another server): read again whenever its stamp shows another
#: process wrote it, and written by merging under the store's lock, so no process drops another's languages
_MEM: OrderedDict[str, dict[str, Any]] = OrderedDict()
_MEM_MAX = 20_000
_MEM_LOCK = threading.Lock()
_DISK = DiskCache("compression", METRICS_VERSION)
_FLIGHT = SingleFlight()


def _params_key(power: float) -> str:
    return f"v{METRICS_VERSION}-p{power:g}"


def _remember(key: str, stats: dict[str, Any]) -> None:
    with _MEM_LOCK:
        _MEM[key] = stats
        _MEM.move_to_end(key)
        while len(_MEM) > _MEM_MAX:
            _MEM.popitem(last=False)


def _merge_stored(entries: Any) -> None:
    """Remember the stored entries this process does not hold yet (its own results stay as they are)."""
    if not isinstance(entries, dict):
        return
    for k, v in entries.items():
        if isinstance(v, dict):
            with _MEM_LOCK:
                present = k in _MEM
            if not present:
                _remember(k, v)


def _load_disk(tok_hash: str, power: float) -> None:
    """Merge one tokenizer's stored results into memory: once, and again whenever another process has written
    the document since (`DiskCache.read_if_changed`: one `stat` a call, so a long-running server sees what a CLI
    run or another server computed instead of computing it again)."""
    _merge_stored(_DISK.read_if_changed(f"{tok_hash}-{_params_key(power)}"))


def _save_disk(tok_hash: str, power: float) -> None:
    """Store this process's results of one tokenizer, merged with what the document holds now (another process
    may have added languages since this one read it), under the store's lock; best effort."""
    name = f"{tok_hash}-{_params_key(power)}"
    prefix = f"{tok_hash}|"
    suffix = f"|{_params_key(power)}"
    with _MEM_LOCK:
        entries = {k: v for k, v in _MEM.items() if k.startswith(prefix) and k.endswith(suffix)}

    def merge(stored: Any) -> dict[str, Any]:
        _merge_stored(stored)  # what another process added is this process's too, from now on
        kept = {k: v for k, v in stored.items() if isinstance(v, dict)} if isinstance(stored, dict) else {}
        return {**kept, **entries}

    _DISK.update(name, merge)  # this process now holds everything the document holds


def clear_cache(disk: bool = False) -> None:
    """Forget cached results in memory (and, with disk=True, the stored documents)."""
    with _MEM_LOCK:
        _MEM.clear()
    _DISK.forget_reads()
    if disk:
        _DISK.clear()


def _finite(x: Any) -> Any:
    """NaN/inf → None so rows are valid JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def language_stats(
    tok: LoadedTokenizer,
    data: Any,
    lang: str,
    *,
    power: float = DEFAULT_POWER,
    use_cache: bool = True,
    refresh: bool = True,
) -> tuple[dict[str, Any], bool]:
    """Metrics of one tokenizer on one FLORES language (cached); returns (stats, was_cached). With `refresh`, the
    stored results are read again first if another process has written them since (a `stat`, ~40 µs);
    :func:`compression_table` does that once per tokenizer and looks its languages up without it."""
    code = data.resolve(lang)
    key = f"{tok.content_hash}|{code}|{data.data_hash(code)}|{_params_key(power)}"
    if use_cache:
        if refresh:
            _load_disk(tok.content_hash, power)
        with _MEM_LOCK:
            got = _MEM.get(key)
        if got is not None:
            return got, True
    computed = []

    def compute() -> dict[str, Any]:
        if use_cache:  # a flight that finished between our cache check and now left its result here
            with _MEM_LOCK:
                done = _MEM.get(key)
            if done is not None:
                return done
        computed.append(True)
        return _compute_language(tok, data, code, key, power)

    # identical concurrent requests (several sessions, same tokenizer and language) compute once
    stats = _FLIGHT.run(key, compute)
    return stats, not computed


def _compute_language(tok: LoadedTokenizer, data: Any, code: str, key: str, power: float) -> dict[str, Any]:
    raw = corpus_stats(tok, data.lines(code), power=power, per_sentence=True)
    raw.pop("sentence_bytes", None)
    # per-sentence token counts as base64 uint32: small JSON that parses fast (decoded only for parity)
    counts = np.asarray(raw.pop("sentence_tokens"), dtype="<u4")
    stats = {k: _finite(v) for k, v in raw.items()}
    stats["sentence_tokens_b64"] = base64.b64encode(counts.tobytes()).decode("ascii")
    stats["key"] = key
    _remember(key, stats)
    return stats


def premium(tokens: Sequence[int], reference_tokens: Sequence[int]) -> float | None:
    """Tokenization premium vs a reference on parallel sentences: the mean of per-sentence token ratios.

    This is the parity definition of Petrov et al. (2023) as Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving
    BPE-Tokenizers with Token Reuse" (EMNLP 2025) use it (it reproduces their Table 3:
    Arabic vs English on FLORES-200 devtest, LLaMA-3.1 1.67, Qwen 1.65); `parity_corpus` is Σ tokens / Σ ref tokens.
    """
    a = np.asarray(tokens, dtype=np.float64)
    b = np.asarray(reference_tokens, dtype=np.float64)
    if a.size != b.size or a.size == 0:
        return None
    ok = b > 0
    return float((a[ok] / b[ok]).mean()) if ok.any() else None


def _sentence_tokens(tokens_b64: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(tokens_b64), dtype="<u4")


@memoize(maxsize=_MEM_MAX)
def _premium_of(tokens_b64: str, ref_tokens_b64: str) -> float | None:
    """premium() of two per-sentence token counts as the cache stores them (base64 uint32), memoised."""
    return premium(_sentence_tokens(tokens_b64), _sentence_tokens(ref_tokens_b64))


def _cached_premium(stats: dict[str, Any], ref_stats: dict[str, Any]) -> float | None:
    """premium() of two cached stats entries."""
    return _premium_of(stats["sentence_tokens_b64"], ref_stats["sentence_tokens_b64"])


def compression_table(
    tokenizers: Sequence[LoadedTokenizer],
    data: Any,
    langs: Sequence[str] | str | None = None,
    *,
    power: float = DEFAULT_POWER,
    reference: str = "eng_Latn",
    progress: Progress | None = None,
    use_cache: bool = True,
    names: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per tokenizer × language with every metric plus `parity` (tokens / reference tokens).

    `data` is a :class:`analysis.texts.flores.FloresData`; `langs` is None/"all", "a,b" or a list of codes.
    `parity` is the premium of Petrov et al. 2023 (mean per-sentence token ratio vs the reference language,
    see :func:`premium`), `parity_corpus` the ratio of totals; both need the reference language in the data and
    the same number of sentences (parallel data), otherwise they are None. `progress` is called per cell.
    """
    if not tokenizers:
        raise DataError("choose at least one tokenizer")
    labels = list(names) if names is not None else [t.name for t in tokenizers]
    if len(labels) != len(tokenizers):
        raise ValueError("names must have one entry per tokenizer")
    if not (isinstance(power, (int, float)) and math.isfinite(power) and power > 0):
        raise DataError(f"the Rényi power must be a positive number, not {power}")
    codes = data.resolve_many(langs)
    if reference and reference not in data:
        raise DataError(f"the parity reference {reference!r} is not a language of this FLORES data")
    ref = data.resolve(reference) if reference else None
    total = len(tokenizers) * len(codes)
    rows: list[dict[str, Any]] = []
    done = 0
    for tok, label in zip(tokenizers, labels):
        computed = 0  # cells computed since the last save of this tokenizer's disk cache
        if use_cache:  # what this or another process has stored, read once per tokenizer and sweep
            _load_disk(tok.content_hash, power)
        ref_stats = None
        if ref is not None:
            ref_stats, was = language_stats(tok, data, ref, power=power, use_cache=use_cache, refresh=False)
            computed += not was
        for code in codes:
            if code == ref and ref_stats is not None:
                stats, was = ref_stats, True
            else:
                stats, was = language_stats(tok, data, code, power=power, use_cache=use_cache, refresh=False)
            computed += not was
            if computed >= 32 and use_cache:  # save as we go: an interrupted run keeps its work
                _save_disk(tok.content_hash, power)
                computed = 0
            meta = language(code)
            parity = parity_corpus = None
            if ref_stats and ref_stats["tokens"] and ref_stats["sentences"] == stats["sentences"]:
                parity_corpus = stats["tokens"] / ref_stats["tokens"]
                parity = _cached_premium(stats, ref_stats)
            row = {
                "tokenizer": label,
                "lang": code,
                "name": meta.name,
                "script": meta.script,
                "family": meta.family,
                **stats,
                "spaceless": bool(stats["spaceless"] or meta.spaceless),
                "parity": parity,
                "parity_corpus": parity_corpus,
                "tokenizer_hash": tok.content_hash,
                "data_hash": data.data_hash(code),
            }
            rows.append({k: row.get(k) for k in ROW_COLUMNS})
            done += 1
            report(progress, done, total, f"{label} · {code}")
        if computed and use_cache:
            _save_disk(tok.content_hash, power)
    return rows


#: Columns of a compression row on a user corpus (`compress --corpus`, the Compression page's own corpus): the
#: group (`corpus`: a file, folder, input or ``all``) replaces the FLORES language and its metadata; `parity_corpus`
#: (Σ tokens / Σ tokens of the reference group, when both have as many sentences) replaces the per-sentence premium.
CORPUS_ROW_COLUMNS = ["tokenizer", "corpus"] + [
    c
    for c in ROW_COLUMNS
    if c not in ("tokenizer", "lang", "name", "script", "family", "parity", "data_hash")
]


def corpus_rows(
    tok: LoadedTokenizer,
    groups: Mapping[str, Mapping[str, Any]],
    *,
    label: str | None = None,
    reference: str | None = None,
) -> list[dict[str, Any]]:
    """Compression rows of one tokenizer on the groups of a corpus (group → :func:`stats_from_counts` dict).

    `reference` names a group to compare with (`parity_corpus`); it is None where the group is absent or has
    another number of sentences (the ratio of totals only means something on parallel text).
    """
    ref = groups.get(reference) if reference else None
    rows = []
    for g, stats in groups.items():
        parity_corpus = None
        if ref and ref["tokens"] and ref["sentences"] == stats["sentences"]:
            parity_corpus = stats["tokens"] / ref["tokens"]
        row = {
            **{k: _finite(v) for k, v in stats.items()},
            "tokenizer": label or tok.name,
            "corpus": g,
            "parity_corpus": parity_corpus,
            "tokenizer_hash": tok.content_hash,
        }
        rows.append({k: row.get(k) for k in CORPUS_ROW_COLUMNS})
    return rows


@dataclass
class CompressionResult:
    """Compression rows of one run: tokenizer × FLORES language (`kind="flores"`, :func:`compression_table`)
    or tokenizer × corpus group (`kind="corpus"`, :func:`corpus_rows`), with the parameters they were measured
    with. :meth:`to_json` is what `python -m analysis compress --json` prints and the Compression page downloads:
    the list of rows (strict JSON: NaN and infinities are None)."""

    kind: str
    rows: list[dict[str, Any]]
    power: float = DEFAULT_POWER
    reference: str | None = None
    #: where the text came from: FLORES root and split, or the corpus inputs, grouping and per-tokenizer runs
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        """The row columns, in display order."""
        return ROW_COLUMNS if self.kind == "flores" else CORPUS_ROW_COLUMNS

    @property
    def key(self) -> str:
        """The column that names a row's text: `lang` or `corpus`."""
        return "lang" if self.kind == "flores" else "corpus"

    def summary(self, metric: str = "bytes_per_token") -> list[dict[str, Any]]:
        """:func:`summarize` of the rows (the parity reference left out of its own parity)."""
        return summarize(self.rows, metric, self.reference)

    def to_json(self) -> list[dict[str, Any]]:
        """The rows, one JSON object each (columns in display order)."""
        return [{k: _finite(r.get(k)) for k in self.columns} for r in self.rows]

    def to_csv(self) -> str:
        """The rows as CSV text (a header of :attr:`columns`)."""
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=self.columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(self.rows)
        return buf.getvalue()


# --------------------------------------------------------------------------------------------------
# Across languages
# --------------------------------------------------------------------------------------------------
def gini(values: Iterable[float]) -> float:
    """Gini coefficient of non-negative values (0 = all equal, → 1 = concentrated); NaN/None dropped."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if x.size == 0 or x.sum() == 0:
        return 0.0
    x = np.sort(x)
    n = x.size
    cum = np.cumsum(x)
    return float((n + 1 - 2 * (cum / cum[-1]).sum()) / n)


def _values(rows: Sequence[dict], tokenizer: str, metric: str) -> dict[str, float]:
    return {
        r.get("lang", r.get("corpus")): float(r[metric])
        for r in rows
        if r["tokenizer"] == tokenizer and r.get(metric) is not None and math.isfinite(float(r[metric]))
    }


def _tokenizers(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["tokenizer"] for r in rows))


#: Metrics measured against a reference language: the reference's own row (always 1) is no measurement.
RELATIVE_METRICS = ("parity", "parity_corpus")


def summarize(
    rows: Sequence[dict], metric: str = "bytes_per_token", reference: str | None = None
) -> list[dict[str, Any]]:
    """Per tokenizer: languages, mean, median, min, max and Gini of one metric across languages.

    For the parity metrics, the `reference` language (compared with itself: always 1) is left out."""
    out = []
    for t in _tokenizers(rows):
        values = _values(rows, t, metric)
        if metric in RELATIVE_METRICS and reference is not None:
            values.pop(reference, None)
        v = np.asarray(list(values.values()), dtype=np.float64)
        out.append(
            {
                "tokenizer": t,
                "metric": metric,
                "languages": int(v.size),
                "mean": float(v.mean()) if v.size else None,
                "median": float(np.median(v)) if v.size else None,
                "min": float(v.min()) if v.size else None,
                "max": float(v.max()) if v.size else None,
                "gini": gini(v),
            }
        )
    return out


def script_group(script: str, table2: bool = True) -> str:
    """A script's group: with table2=True the groups of Purason et al., Table 2 (Latn, Cyrl, Arab, Jpan, Hani, Other)."""
    s = {"Hans": "Hani", "Hant": "Hani"}.get(script, script)
    if table2 and s not in TABLE2_GROUPS:
        return "Other"
    return s


def script_summary(
    rows: Sequence[dict], metric: str = "bytes_per_token", table2: bool = True
) -> list[dict[str, Any]]:
    """Mean of a metric per script group and tokenizer, with the language count n (Purason et al., Table 2 layout)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        v = r.get(metric)
        if v is None or not math.isfinite(float(v)):
            continue
        groups.setdefault((script_group(r["script"], table2), r["tokenizer"]), []).append(float(v))
    order = list(TABLE2_GROUPS) + ["Other"] if table2 else sorted({g for g, _ in groups})
    out = []
    for g in order:
        for t in _tokenizers(rows):
            vals = groups.get((g, t))
            if vals:
                out.append({"script": g, "tokenizer": t, "n": len(vals), "mean": float(np.mean(vals))})
    return out


def compare(
    rows: Sequence[dict],
    a: str,
    b: str,
    metric: str = "bytes_per_token",
    higher_is_better: bool | None = None,
) -> dict[str, Any]:
    """Tokenizer a vs b on the languages both have: mean Δrel = a/b − 1 and win rate of a (Purason et al., Table 1).

    For a lower-is-better metric (fertility, parity…) a "win" is a lower value, and Δrel is still a/b − 1.
    """
    hib = HIGHER_IS_BETTER.get(metric, True) if higher_is_better is None else higher_is_better
    va, vb = _values(rows, a, metric), _values(rows, b, metric)
    common = [k for k in va if k in vb and vb[k] != 0]
    per = []
    for k in common:
        d = va[k] / vb[k] - 1.0
        win = va[k] > vb[k] if hib else va[k] < vb[k]
        per.append({"lang": k, "a": va[k], "b": vb[k], "delta_rel": d, "win": bool(win)})
    n = len(per)
    return {
        "a": a,
        "b": b,
        "metric": metric,
        "languages": n,
        "delta_rel": float(np.mean([p["delta_rel"] for p in per])) if n else None,
        "win_rate": sum(p["win"] for p in per) / n if n else None,
        "per_language": per,
    }


def script_compare(
    rows: Sequence[dict], a: str, b: str, metric: str = "bytes_per_token", table2: bool = True
) -> list[dict[str, Any]]:
    """Mean Δrel (a/b − 1) per script group, as in Purason et al., Table 2."""
    script_of_lang = {r["lang"]: r["script"] for r in rows}
    per = compare(rows, a, b, metric)["per_language"]
    groups: dict[str, list[float]] = {}
    for p in per:
        groups.setdefault(script_group(script_of_lang[p["lang"]], table2), []).append(p["delta_rel"])
    order = list(TABLE2_GROUPS) + ["Other"] if table2 else sorted(groups)
    return [
        {"script": g, "n": len(groups[g]), "delta_rel": float(np.mean(groups[g]))}
        for g in order
        if g in groups
    ]


# --------------------------------------------------------------------------------------------------
# Drill-down
# --------------------------------------------------------------------------------------------------
def worst_sentences(tok: LoadedTokenizer, lines: Sequence[str], k: int = 10) -> list[dict[str, Any]]:
    """The k sentences with the lowest bytes/token, each with its tokens (readable) and ids."""
    idx = [i for i, s in enumerate(lines) if s]
    sel = [lines[i] for i in idx]
    if not sel:
        raise DataError("no non-empty lines to measure")
    enc = _rust_tokenizer(tok).encode_batch(sel, add_special_tokens=False)
    bpt = [(len(s.encode("utf-8")) / len(e.ids) if e.ids else float("inf")) for s, e in zip(sel, enc)]
    order = sorted(range(len(sel)), key=lambda j: bpt[j])[: max(0, k)]
    out = []
    for j in order:
        e = enc[j]
        out.append(
            {
                "index": idx[j],
                "text": sel[j],
                "tokens": len(e.ids),
                "bytes": len(sel[j].encode("utf-8")),
                "bytes_per_token": bpt[j],
                "ids": list(e.ids),
                "offsets": [tuple(o) for o in e.offsets],
                "pieces": [tok.readable(t) for t in e.tokens],
            }
        )
    return out


def worst_languages(
    rows: Sequence[dict], metric: str = "bytes_per_token", k: int = 20
) -> dict[str, list[dict]]:
    """Per tokenizer, its `k` worst languages on a metric (lowest first for higher-is-better metrics, highest
    first otherwise): ``{tokenizer: [{"lang", "name", "script", "value"}, …]}``."""
    hib = HIGHER_IS_BETTER.get(metric, True)
    meta = {r["lang"]: r for r in rows}
    out = {}
    for t in _tokenizers(rows):
        vals = sorted(_values(rows, t, metric).items(), key=lambda kv: kv[1], reverse=not hib)[:k]
        out[t] = [
            {"lang": c, "name": meta[c].get("name", c), "script": meta[c].get("script", ""), "value": v}
            for c, v in vals
        ]
    return out


def to_latex(
    rows: Sequence[dict],
    columns: Sequence[str],
    caption: str = "",
    digits: int = 3,
    *,
    longtable: bool = False,
    label: str = "",
) -> str:
    """A booktabs LaTeX table of the given columns (special characters escaped).

    With `longtable` (for hundreds of rows, e.g. all 204 FLORES languages) the table breaks across pages and
    repeats its header on each one (``\\usepackage{booktabs,longtable}``); numbers are right-aligned, in a
    footnote-sized font so that up to eight tokenizer columns fit the text width.
    """

    def esc(v: Any) -> str:
        """One cell as LaTeX text."""
        if v is None:
            return "--"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        s = str(v)
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                     ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")):  # fmt: skip
            s = s.replace(a, b)
        return s

    head = " & ".join(esc(c) for c in columns)
    body = "\n".join(" & ".join(esc(r.get(c)) for c in columns) + r" \\" for r in rows)
    cap = f"\\caption{{{esc(caption)}}}\n" if caption else ""
    lab = f"\\label{{{label}}}" if label else ""
    if longtable:
        numeric = [any(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows)
                   for c in columns]  # fmt: skip
        spec = "".join("r" if n else "l" for n in numeric)
        cap_lt = f"\\caption{{{esc(caption)}}}{lab}\\\\\n" if caption else ""
        return (
            "% needs \\usepackage{booktabs,longtable}\n{\\footnotesize\\setlength{\\tabcolsep}{4pt}\n"
            f"\\begin{{longtable}}{{{spec}}}\n{cap_lt}\\toprule\n{head} \\\\\n\\midrule\n\\endfirsthead\n"
            f"\\toprule\n{head} \\\\\n\\midrule\n\\endhead\n\\bottomrule\n\\endlastfoot\n"
            f"{body}\n\\end{{longtable}}\n}}\n"
        )
    spec = "l" * len(columns)
    return (
        f"\\begin{{table}}[t]\n\\centering\n{cap}\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head} \\\\\n\\midrule\n"
        f"{body}\n\\bottomrule\n\\end{{tabular}}\n\\end{{table}}\n"
    )
