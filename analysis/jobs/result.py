"""What `python -m analysis corpus-stats` reports about one corpus statistic: :class:`CorpusStatsResult`.

:meth:`CorpusStatsResult.to_json` is the summary printed with ``--json`` (how the run went, the corpus size and
the statistic's headline numbers with its most frequent keys); :meth:`CorpusStatsResult.data_json` is the full
result ``--out FILE`` writes (counts sorted by key, or the learned merges), so runs on different executors can
be compared byte for byte.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.bpe import never_produced_from_counts
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .run import CorpusRun
from .stats import TrainingWords, train_from_words


def _key(k: Any) -> Any:
    return list(k) if isinstance(k, tuple) else k


def _top(counts: dict, n: int) -> list:
    """The `n` most frequent entries, ties by their text: only the entries at or above the n-th largest count are
    sorted (a corpus has millions of words; each sort key formats its word)."""
    if n <= 0:
        return []
    items = counts.items()
    if len(counts) > n:
        cut = heapq.nlargest(n, counts.values())[-1]
        items = [(k, c) for k, c in items if c >= cut]
    return [[_key(k), c] for k, c in sorted(items, key=lambda kv: (-kv[1], str(kv[0])))[:n]]


def _finite_rows(groups: dict) -> dict:
    return {
        g: {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for g, row in groups.items()
    }


@dataclass
class CorpusStatsResult:
    """One corpus statistic over a corpus, with the run that computed it (and, for `words` with `n_new`, the
    merges learned from the counted words by the unchanged single-machine trainer)."""

    tok: LoadedTokenizer
    run: CorpusRun
    top: int = 10
    n_new: int | None = None
    max_token_length: int | None = None

    def __post_init__(self) -> None:
        self.training = None
        r = self.run.result
        if self.run.stat == "words" and self.n_new and isinstance(r, TrainingWords):
            self.training = train_from_words(self.tok, r, self.n_new, max_token_length=self.max_token_length)

    def to_json(self) -> dict[str, Any]:
        """The run (executor, shards, bytes, seconds, tasks), the tokenizer and the statistic's summary."""
        out = self.run.summary()
        out["tokenizer"] = self.tok.name
        r, tok, stat = self.run.result, self.tok, self.run.stat
        if r is None:
            out["note"] = f"submitted; rerun the same command to collect the result from {self.run.workdir}"
        elif stat == "pretokens":
            out.update(units=r.units, chars=r.chars, distinct=len(r.counts), top=_top(r.counts, self.top))
        elif stat == "words":
            out.update(mode=r.mode, units=r.units, chars=r.chars, word_types=len(r.words))
            out["coverage_characters"] = [ch for ch, _ in r.characters]
            out["top"] = _top(r.words, self.top)
            if self.training is not None:
                out["new_tokens"] = self.training.n_new
                out["first_new"] = [tok.readable(t) for t in self.training.new_tokens(20)]
        elif stat == "token-ids":
            nz = np.flatnonzero(r)
            out.update(tokens=int(r.sum()), distinct_ids=int(nz.size))
            out["top"] = [
                [tok.readable(tok.id_to_token.get(int(i), "")), int(r[i])] for i in np.argsort(-r)[: self.top]
            ]
        elif stat == "produced-ids":
            never = never_produced_from_counts(tok, r)
            out.update(tokens=sum(r.values()), distinct_ids=len(r), never_produced=len(never))
        elif stat == "merge-counts":
            tcounts, mcounts = r
            out.update(tokens=sum(tcounts.values()), merges_applied=sum(mcounts.values()))
            out["distinct_merges"] = len(mcounts)
        elif stat == "compression":
            out["groups"] = _finite_rows(r)
        elif stat == "source-words":
            out.update(records=r.n_records, bytes_text=r.n_bytes, repos=len(r.repos), languages=r.languages)
            out["word_types"] = len(r.words)
        return out

    def data_json(self) -> Any:
        """The full result (None for a job submitted without waiting)."""
        r, stat = self.run.result, self.run.stat
        if r is None:
            return None
        if stat == "pretokens":
            return {"units": r.units, "chars": r.chars, "counts": sorted(r.counts.items())}
        if stat == "words":
            if self.training is not None:
                return {
                    "merges": [list(m) for m in self.training.merges()],
                    "new_tokens": self.training.new_tokens(),
                }
            return {
                "units": r.units,
                "chars": r.chars,
                "words": sorted([list(k), c] for k, c in r.words.items()),
            }
        if stat == "token-ids":
            return {"counts": r.tolist()}
        if stat == "produced-ids":
            return {"counts": sorted(r.items()), "never_produced": never_produced_from_counts(self.tok, r)}
        if stat == "merge-counts":
            tcounts, mcounts = r
            return {
                "tokens": sorted(Counter(tcounts).items()),
                "merges": sorted([a, b, c] for (a, b), c in mcounts.items()),
            }
        if stat == "compression":
            return _finite_rows(r)
        return {
            "repos": r.repos,
            "languages": r.languages,
            "words": [
                [w, f, list(map(list, d)), list(map(list, e))]
                for w, f, d, e in zip(r.words, r.freqs, r.repo_dist, r.lang_dist)
            ],
        }
