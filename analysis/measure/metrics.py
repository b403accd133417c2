"""Corpus-level compression metrics and cross-language summaries, as Purason, Chizhov, Yamshchikov, Fishel,
"Teaching Old Tokenizers New Words" (arXiv 2512.03989, 2025; "Purason et al." below) measure them (§4.2).

Every metric is corpus-level: sums over sentences, then one ratio (never a mean of per-sentence ratios).
Texts are encoded by :func:`analysis.measure.fast_encode.encode_ids`: the ids of
``tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)`` (gigatoken's where they were verified identical),
so no BOS/EOS tokens are counted, and ignore_merges is used exactly as the tokenizer has it.

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

This module is the metric registry (:data:`METRICS`: name, label, direction, formula) and the one formula over
corpus sums (:func:`stats_from_counts`, :func:`corpus_stats`). Around it: :mod:`analysis.measure.corpus_counts`
(what a text is counted into), :mod:`analysis.measure.renyi` (Rényi efficiency), :mod:`analysis.measure.grid` (the
tokenizer × language grid with its content-keyed cache, and the rows of a user corpus) and
:mod:`analysis.measure.summaries` (across languages: :func:`~analysis.measure.summaries.gini`, summaries per
language and per script, Purason et al., Table 2; Δrel and win rate, Table 1; the drill-down and LaTeX).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .corpus_counts import (
    SPACELESS_CHARS_PER_WORD,
    TOTALS,
    TokenFacts,
    chunk_totals,
    encode_ids,
    text_counts,
    token_facts,
)
from .renyi import DEFAULT_POWER, renyi_efficiency_from_counts

#: Bumped whenever a metric definition changes (part of every cache key).
METRICS_VERSION = 7


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
