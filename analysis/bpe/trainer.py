"""The one BPE trainer: incremental merge learning over word types, with pluggable pair statistics.

Byte-pair encoding as Sennrich, Haddow & Birch, *Neural Machine Translation of Rare Words with Subword Units*
(ACL 2016), learned incrementally over word types like the `tokenizers` trainer:

* the corpus is a list of **word types** — sequences of symbols with a frequency;
* every adjacent **pair** has a count F, the sum of the frequencies of the words it occurs in (once per
  occurrence), and an index pair → words that hold it;
* a lazy max-heap orders the pairs by the statistics' priority, then by the (left, right) strings, so ties go
  to the lexicographically smallest pair (deterministic); an entry whose pair has changed since it was queued
  is re-queued with its current priority when it reaches the top;
* the best pair is **merged** in every word that holds it (left to right, non-overlapping); only the
  neighbours of each occurrence change, so only their counts are updated;
* a pair whose merged string is refused (`valid`, `max_token_length`) or that the statistics skip is banned
  for good, and the next pair is taken; training stops after `n_new` merges whose result is a new token.

The pair statistics are a small plug-in:

* :class:`FrequencyStats` — plain BPE: priority F, nothing skipped (the fast path: the trainer updates F
  itself and calls no plug-in code per occurrence);
* :class:`SourceStats` — source-attributed BPE (SA-BPE; Chizhov, Bogomolov & Yamshchikov, *From Where Words
  Come: Efficient Regularization of Code Tokenizers Through Source Attribution*, ACL 2026): every pair also
  keeps per-repository and per-language counters, so R (distinct repositories) and L (distinct languages) are
  exact at every step; priorities ``F``, ``F*L``, ``F*log(R+1)``, ``F*log(R)``, ``F*log(R+1)*L``,
  ``F*log(R)*L`` (ties: higher F first); merge skipping by :class:`SkipRule`.

Continued training (:mod:`analysis.bpe.training`) and SA-BPE (:mod:`analysis.methods.sabpe.sabpe`) both call :func:`learn`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar

import numpy as np

from analysis.core.memory import no_cyclic_gc
from analysis.core.progress import Progress, report
from analysis.errors import DataError

Pair = tuple[int, int]


def symbol_table() -> tuple[list[str], Callable[[str], int]]:
    """(symbols, intern): `intern(s)` gives each distinct string a dense id; `symbols[id]` gives it back."""
    ids: dict[str, int] = {}
    syms: list[str] = []

    def intern(s: str) -> int:
        i = ids.get(s)
        if i is None:
            i = ids[s] = len(syms)
            syms.append(s)
        return i

    return syms, intern


# --------------------------------------------------------------------------------------------------
# Pair statistics: plain frequency
# --------------------------------------------------------------------------------------------------
class FrequencyStats:
    """Plain BPE statistics: a pair's priority is its frequency F; no pair is skipped.

    The interface every statistics plug-in has:

    * `per_word` — whether the trainer must report each word's pair-occurrence changes (:meth:`add`);
    * :meth:`bind` — called once with the input position of every word the trainer keeps;
    * :meth:`add` — word `w`'s occurrence count of each pair changed by `delta[pair]`;
    * :meth:`order` — the heap order of a pair with frequency `freq` (a tuple, smallest first);
    * :meth:`skip` — why a pair is never merged (None: merge it);
    * :meth:`info` — the statistics recorded with a popped pair;
    * :meth:`forget` — drop the state of a pair that was merged.
    """

    per_word: ClassVar[bool] = False

    def bind(self, word_index: Sequence[int]) -> None:
        """Nothing to bind: F is kept by the trainer."""

    def add(self, w: int, delta: dict[Pair, int]) -> None:
        """Nothing to add: F is kept by the trainer."""

    def order(self, pair: Pair, freq: int) -> tuple:
        """(−F,): the most frequent pair first."""
        return (-freq,)

    def skip(self, pair: Pair, freq: int) -> str | None:
        """Plain BPE skips nothing."""
        return None

    def info(self, pair: Pair, freq: int, order: tuple) -> tuple:
        """No statistics beyond F."""
        return ()

    def forget(self, pair: Pair) -> None:
        """No per-pair state."""


# --------------------------------------------------------------------------------------------------
# Pair statistics: source-attributed (SA-BPE)
# --------------------------------------------------------------------------------------------------
#: Merge priority criteria of SA-BPE (plus plain BPE, "F").
PRIORITIES = ("F", "F*L", "F*log(R+1)", "F*log(R)", "F*log(R+1)*L", "F*log(R)*L")
#: The recommended "parameter-free" default for multilingual code (Chizhov et al.).
DEFAULT_PRIORITY = "F*log(R)*L"
PRIORITY_HELP = {
    "F": "plain BPE: pair frequency",
    "F*L": "prioritise language-universal merges",
    "F*log(R+1)": "lower the priority of pairs present in few repositories",
    "F*log(R)": "as above, and single-repository pairs get priority 0 (merged last)",
    "F*log(R+1)*L": "repositories and languages combined",
    "F*log(R)*L": "repositories and languages combined, single-repository pairs last (paper's best)",
}


def normalize_priority(name: str) -> str:
    """The canonical spelling of a priority criterion (spaces, `·`, case and `log R` forms accepted)."""
    s = name.replace(" ", "").replace("·", "*").replace("×", "*").upper().replace("LOG", "log")
    s = s.replace("logR+1", "log(R+1)").replace("log(R)", "log(R)")
    if s.endswith("logR") or "logR*" in s:
        s = s.replace("logR", "log(R)")
    for p in PRIORITIES:
        if s == p.upper().replace("LOG", "log"):
            return p
    raise DataError(f"unknown priority criterion {name!r}; choose one of {', '.join(PRIORITIES)}")


def priority_function(name: str) -> Callable[[int, int, int], float]:
    """The function (F, R, L) → priority of a criterion."""
    p = normalize_priority(name)
    log = math.log
    return {
        "F": lambda f, r, g: f,
        "F*L": lambda f, r, g: f * g,
        "F*log(R+1)": lambda f, r, g: f * log(r + 1),
        "F*log(R)": lambda f, r, g: f * log(r) if r > 0 else 0.0,
        "F*log(R+1)*L": lambda f, r, g: f * log(r + 1) * g,
        "F*log(R)*L": lambda f, r, g: f * log(r) * g if r > 0 else 0.0,
    }[p]


@dataclass(frozen=True)
class SkipRule:
    """Merge-skip thresholds: a pair is never merged if R < min_repos, L < min_languages or top share > max_share."""

    min_repos: int = 1
    min_languages: int = 1
    max_share: float | None = None

    @property
    def active(self) -> bool:
        """Whether any threshold is switched on."""
        return self.min_repos > 1 or self.min_languages > 1 or self.max_share is not None

    def reason(self, freq: int, repos: int, languages: int, top: int) -> str | None:
        """Why a pair with these statistics is skipped (None = merge it)."""
        if repos < self.min_repos:
            return f"R={repos} < {self.min_repos}"
        if languages < self.min_languages:
            return f"L={languages} < {self.min_languages}"
        if self.max_share is not None and freq > 0 and top / freq > self.max_share:
            return f"top-repo share {top / freq:.2f} > {self.max_share:g}"
        return None

    def label(self) -> str:
        """A short description (e.g. `skip R<2, share>0.9`)."""
        parts = []
        if self.min_repos > 1:
            parts.append(f"R<{self.min_repos}")
        if self.min_languages > 1:
            parts.append(f"L<{self.min_languages}")
        if self.max_share is not None:
            parts.append(f"share>{self.max_share:g}")
        return ("skip " + ", ".join(parts)) if parts else "no skipping"


#: One word's sources: (source ids, counts), e.g. the repositories a word type occurs in and how often.
SourceDist = tuple[tuple[int, ...], tuple[int, ...]]


def _add_counts(counter: dict, items: Iterable[tuple[Any, int]], d: int) -> None:
    """counter[k] += d * c for each (k, c), dropping keys that reach zero (R and L are len(counter))."""
    for k, c in items:
        v = counter.get(k, 0) + d * c
        if v:
            counter[k] = v
        else:
            del counter[k]


class SourceStats(FrequencyStats):
    """Source-attributed statistics: per pair, occurrences per repository and per language.

    `repo_dist[i]` / `lang_dist[i]` are the sources of input word i as (ids, counts). A pair's R and L are the
    number of repositories / languages with a non-zero count; its priority is `priority(F, R, L)` (ties: higher
    F first); `skip` bans a pair by R, L or the share of its top repository.
    """

    per_word: ClassVar[bool] = True

    def __init__(
        self,
        repo_dist: Sequence[SourceDist],
        lang_dist: Sequence[SourceDist],
        priority: str = DEFAULT_PRIORITY,
        skip: SkipRule | None = None,
    ) -> None:
        self.repo_dist, self.lang_dist = repo_dist, lang_dist
        self.priority = priority_function(priority)
        self.rule = skip or SkipRule()
        self.rcount: dict[Pair, dict[int, int]] = {}
        self.lcount: dict[Pair, dict[int, int]] = {}
        self.rd: list[tuple[tuple[int, int], ...]] = []
        self.ld: list[tuple[tuple[int, int], ...]] = []

    def bind(self, word_index: Sequence[int]) -> None:
        """Per trained word: its (repository, count) and (language, count) pairs."""
        self.rd = [tuple(zip(*self.repo_dist[i])) for i in word_index]
        self.ld = [tuple(zip(*self.lang_dist[i])) for i in word_index]

    def add(self, w: int, delta: dict[Pair, int]) -> None:
        """Add word w's sources d times to the counters of each pair whose occurrences changed by d."""
        rd, ld = self.rd[w], self.ld[w]
        rcount, lcount = self.rcount, self.lcount
        for p, d in delta.items():
            if not d:
                continue
            rc = rcount.get(p)
            if rc is None:
                rc = rcount[p] = {}
                lc = lcount[p] = {}
            else:
                lc = lcount[p]
            _add_counts(rc, rd, d)
            _add_counts(lc, ld, d)

    def order(self, pair: Pair, freq: int) -> tuple:
        """(−priority, −F)."""
        return (-self.priority(freq, len(self.rcount[pair]), len(self.lcount[pair])), -freq)

    def skip(self, pair: Pair, freq: int) -> str | None:
        """The skip rule's reason for this pair (None when the rule is off or passes it)."""
        if not self.rule.active:
            return None
        rc = self.rcount[pair]
        return self.rule.reason(freq, len(rc), len(self.lcount[pair]), max(rc.values()) if rc else 0)

    def info(self, pair: Pair, freq: int, order: tuple) -> tuple:
        """(R, L, priority, top-repository share)."""
        rc = self.rcount[pair]
        top = max(rc.values()) if rc else 0
        return (len(rc), len(self.lcount[pair]), -order[0], top / freq)

    def forget(self, pair: Pair) -> None:
        """Drop a merged pair's counters."""
        self.rcount.pop(pair, None)
        self.lcount.pop(pair, None)


# --------------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pop:
    """One pair taken from the queue: merged (`skipped` None) or skipped by the statistics (with the reason).

    `new`: the merged string is a new token (not known, not produced by an earlier merge). `info`: what the
    statistics record about the pair at that moment (:meth:`FrequencyStats.info`).
    """

    left: str
    right: str
    freq: int
    new: bool
    skipped: str | None = None
    info: tuple = ()

    @property
    def token(self) -> str:
        """The merged string."""
        return self.left + self.right


@dataclass
class TrainRun:
    """What :func:`learn` leaves behind: every popped pair in order and the final segmentation of each word."""

    pops: list[Pop]
    symbols: list[str]
    seqs: list[list[int]]
    word_index: list[int]

    @property
    def merges(self) -> list[tuple[str, str]]:
        """The learned merges in order (skipped pairs left out)."""
        return [(p.left, p.right) for p in self.pops if p.skipped is None]


class _PairIndex:
    """pair → the words that hold it: the initial index as one sorted array (no set per pair), plus the
    words that gained a pair during training (`added`: a set per such pair, filled by the merge loop). Words that lost a pair stay listed (the
    merge loop skips words without an occurrence)."""

    __slots__ = ("slot", "starts", "holders", "added")

    def __init__(self, slot: dict[Pair, int], starts: list[int], holders: Any) -> None:
        self.slot, self.starts, self.holders = slot, starts, holders
        self.added: dict[Pair, set[int]] = {}

    def pop(self, pair: Pair) -> set[int]:
        """The words that hold (or held) pair, forgetting them."""
        out = self.added.pop(pair, None) or set()
        k = self.slot.pop(pair, None)
        if k is not None:
            out.update(self.holders[self.starts[k] : self.starts[k + 1]].tolist())
        return out


def _pair_index(seqs: list[list[int]], freqs: list[int], n_syms: int) -> tuple[dict[Pair, int], _PairIndex]:
    """Pair frequencies (summed word frequencies, once per occurrence) and the pair → words index of the
    initial segmentation, counted with numpy (one sort) instead of a dict update and a set per occurrence."""
    lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    flat = np.fromiter(chain.from_iterable(seqs), dtype=np.int32, count=int(lens.sum()))
    ok = np.ones(len(flat), dtype=bool)  # position i starts a pair (i, i+1) inside one word
    ok[np.cumsum(lens) - 1] = False
    left = np.flatnonzero(ok)
    del ok
    w = np.repeat(np.arange(len(seqs), dtype=np.int32), lens)[left]
    key = flat[left].astype(np.int64) * n_syms + flat[left + 1]
    del flat, left
    order = np.lexsort((w, key))
    key, w = key[order], w[order]
    weight = np.asarray(freqs, dtype=np.int64)[w]
    del order
    if not len(key):
        return {}, _PairIndex({}, [0], np.zeros(0, dtype=np.int32))
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    uniq = key[first]
    totals = np.add.reduceat(weight, first)
    pairs = list(zip((uniq // n_syms).tolist(), (uniq % n_syms).tolist()))
    counts = dict(zip(pairs, totals.tolist()))
    slot = dict(zip(pairs, range(len(pairs))))
    starts = first.tolist() + [len(key)]
    return counts, _PairIndex(slot, starts, w)


def learn(
    words: Iterable[tuple[Sequence[str], int]],
    n_new: int,
    *,
    known: Callable[[str], bool],
    stats: FrequencyStats | None = None,
    valid: Callable[[str], bool] | None = None,
    max_token_length: int | None = None,
    alphabet: Sequence[str] = (),
    progress: Progress | None = None,
    min_frequency: int = 0,
) -> TrainRun:
    """Learn merges over word types until `n_new` merges made a token unknown to `known` (or pairs run out).

    `words`: (symbols, frequency) per word type (words of one symbol or frequency 0 are left out). `stats`: the
    pair statistics plug-in (default :class:`FrequencyStats`, plain BPE). `valid` / `max_token_length` refuse
    merged strings (such pairs are dropped silently); the statistics' skips are recorded as pops with a
    reason. A pair whose frequency is below `min_frequency` is never merged (plain BPE: training stops there,
    as the `tokenizers` trainers' ``min_frequency``). `alphabet` symbols get the first symbol ids.
    `progress(done, total, "merges")` is called about 100 times.
    """
    with no_cyclic_gc():
        return _learn(
            words,
            n_new,
            known,
            stats or FrequencyStats(),
            valid,
            max_token_length,
            alphabet,
            progress,
            min_frequency,
        )


def _learn(
    words: Iterable[tuple[Sequence[str], int]],
    n_new: int,
    known: Callable[[str], bool],
    stats: FrequencyStats,
    valid: Callable[[str], bool] | None,
    max_token_length: int | None,
    alphabet: Sequence[str],
    progress: Progress | None,
    min_frequency: int = 0,
) -> TrainRun:
    plain = type(stats) is FrequencyStats  # the heap's top has the highest frequency
    kept: list[Sequence[str]] = []
    freqs: list[int] = []
    word_index: list[int] = []
    for i, (w, f) in enumerate(words):
        if len(w) > 1 and f > 0:
            kept.append(w)
            freqs.append(f)
            word_index.append(i)
    # symbol ids in order of first appearance (the alphabet first), interned at C speed
    syms = list(dict.fromkeys(chain(alphabet, chain.from_iterable(kept))))
    ids: dict[str, int] = {s: i for i, s in enumerate(syms)}
    get = ids.__getitem__
    seqs: list[list[int]] = [list(map(get, w)) for w in kept]
    del kept

    def sid(s: str) -> int:
        i = ids.get(s)
        if i is None:
            i = ids[s] = len(syms)
            syms.append(s)
        return i

    per_word = stats.per_word
    stats.bind(word_index)
    counts, where = _pair_index(seqs, freqs, len(syms))
    if per_word:
        for wi, seq in enumerate(seqs):
            local: dict[Pair, int] = {}
            for p in zip(seq, seq[1:]):
                local[p] = local.get(p, 0) + 1
            stats.add(wi, local)

    order = stats.order
    heap = [(*order(p, c), syms[p[0]], syms[p[1]], p) for p, c in counts.items()]
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop

    pops: list[Pop] = []
    produced: set[str] = set()
    banned: set[Pair] = set()
    n_done = 0
    report_every = max(1, n_new // 100)
    while heap and n_done < n_new:
        entry = pop(heap)
        pair = entry[-1]
        if pair in banned:
            continue
        c = counts.get(pair, 0)
        if c <= 0:
            continue
        cur = order(pair, c)
        if entry[:-3] != cur:  # stale: re-queue with the current statistics
            push(heap, (*cur, entry[-3], entry[-2], pair))
            continue
        if c < min_frequency:
            if plain:
                break
            banned.add(pair)
            continue
        ls, rs = entry[-3], entry[-2]
        merged = ls + rs
        if (max_token_length and len(merged) > max_token_length) or (valid is not None and not valid(merged)):
            banned.add(pair)
            continue
        reason = stats.skip(pair, c)
        if reason is not None:
            banned.add(pair)
            pops.append(Pop(ls, rs, c, False, reason, stats.info(pair, c, cur)))
            continue
        info = stats.info(pair, c, cur)
        a, b = pair
        m = sid(merged)
        grown: set[Pair] = set()
        added = where.added
        for wi in where.pop(pair):
            seq = seqs[wi]
            last = len(seq) - 1
            occ: list[int] = []  # left-to-right, non-overlapping occurrences of (a, b)
            i = 0
            try:
                while True:
                    i = seq.index(a, i, last)
                    if seq[i + 1] == b:
                        occ.append(i)
                        i += 2
                    else:
                        i += 1
            except ValueError:
                pass
            if not occ:
                continue
            f = freqs[wi]
            local: dict[Pair, int] | None = {} if per_word else None
            nxt = occ[1:] + [-1]
            prev_end = -1
            for i, j in zip(occ, nxt):
                if i:  # the pair on the left changes
                    if i == prev_end:
                        old, new = (b, a), (m, m)
                    else:
                        x = seq[i - 1]
                        old, new = (x, a), (x, m)
                    counts[old] -= f
                    counts[new] = counts.get(new, 0) + f
                    ws = added.get(new)
                    if ws is None:
                        added[new] = {wi}
                    else:
                        ws.add(wi)
                    grown.add(new)
                    if local is not None:
                        local[old] = local.get(old, 0) - 1
                        local[new] = local.get(new, 0) + 1
                # the pair on the right changes, unless another occurrence follows (handled there)
                if i + 1 < last and j != i + 2:
                    y = seq[i + 2]
                    old, new = (b, y), (m, y)
                    counts[old] -= f
                    counts[new] = counts.get(new, 0) + f
                    ws = added.get(new)
                    if ws is None:
                        added[new] = {wi}
                    else:
                        ws.add(wi)
                    grown.add(new)
                    if local is not None:
                        local[old] = local.get(old, 0) - 1
                        local[new] = local.get(new, 0) + 1
                prev_end = i + 2
            for i in reversed(occ):
                seq[i : i + 2] = (m,)
            if local:
                local.pop(pair, None)  # the merged pair is dropped whole below
                stats.add(wi, local)
        counts.pop(pair, None)
        stats.forget(pair)
        grown.discard(pair)
        for p in grown:
            cp = counts.get(p, 0)
            if cp > 0 and p not in banned:
                push(heap, (*order(p, cp), syms[p[0]], syms[p[1]], p))
        is_new = merged not in produced and not known(merged)
        produced.add(merged)
        pops.append(Pop(ls, rs, c, is_new, None, info))
        if is_new:
            n_done += 1
            if n_done % report_every == 0:
                report(progress, n_done, n_new, "merges")
    return TrainRun(pops, syms, seqs, word_index)
