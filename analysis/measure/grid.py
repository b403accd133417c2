"""The tokenizer × language grid of compression rows (:func:`compression_table`, FLORES-200) and the rows of a
user corpus (:func:`corpus_rows`), one :class:`CompressionResult` for both; the per-language results cached in
memory and on disk, keyed by tokenizer content hash + data hash + metric parameters (:data:`METRICS_VERSION`).

`parity` is the premium of Petrov, La Malfa, Torr, Bibi, "Language Model Tokenizers Introduce Unfairness Between
Languages", NeurIPS 2023 (:func:`premium`)."""

from __future__ import annotations

import base64
import csv
import io
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.core.cache import DiskCache, SingleFlight, memoize
from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.texts.flores import language
from analysis.tokenizer.tokenizer import LoadedTokenizer

from . import fast_encode
from .metrics import METRICS, METRICS_VERSION, corpus_stats
from .renyi import DEFAULT_POWER
from .summaries import summarize

#: Columns of a compression row, in display order: the language, every registered metric, the totals, the keys.
ROW_COLUMNS = [
    "tokenizer", "lang", "name", "script", "family", *METRICS,
    "bytes", "chars", "words", "sentences", "power", "tokenizer_hash", "data_hash", "encoder", "encoder_reason",
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
        status = fast_encode.encoder_status(tok)  # which encoder measures this tokenizer's cells, and why
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
                **status,
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
    status = fast_encode.encoder_status(tok)
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
            **status,
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
