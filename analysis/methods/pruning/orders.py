"""Pruning orders: which model-vocabulary ids go first.

An *order* lists ids, first = pruned first; pruning N tokens removes the first N. Orders: last-N by id, naive
frequency, leaf last-N, leaf frequency and merge-based (Purason, Chizhov, Yamshchikov, Fishel, "Teaching Old
Tokenizers New Words: Efficient Tokenizer Adaptation for Pre-trained Models", arXiv 2512.03989, 2025: §3.2,
Alg. 1 and Alg. 2), by Unicode script, and by an externally supplied score (e.g. under-trained indicators).

Every order is one entry of :data:`ORDER_REGISTRY` (an :class:`OrderSpec`: name, description, page label, what it
needs, whether it keeps every surviving token reachable, the corpus statistic that counts its frequencies, and
the function that builds it). The CLI's ``--order`` choices, the Prune page's list and :func:`compute_order` all
read that registry, so adding an order means one function and one registry entry here (and its test).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.bpe import get_replay, vocabulary_structure
from analysis.core.cache import memoize
from analysis.core.unicode import NEUTRAL_SCRIPTS, find_script, text_scripts
from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .common import check_prunable, protected_ids, token_counts


@dataclass(frozen=True)
class PruneOrder:
    """A pruning order: model-vocabulary ids, first = pruned first (protected ids never appear)."""

    method: str
    ids: tuple[int, ...]
    tokenizer_hash: str
    #: the priority each id was popped with (count, score, ...) for display; may be empty
    keys: Mapping[int, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def prefix(self, n: int) -> list[int]:
        """The first n ids (raises DataError when the order is shorter than n)."""
        if n < 0:
            raise DataError("the number of tokens to prune must be >= 0")
        if n > len(self.ids):
            raise DataError(
                f"the {self.method} order can prune at most {len(self.ids)} tokens of this tokenizer; asked for {n}"
            )
        return list(self.ids[:n])


def last_n_order(tok: LoadedTokenizer, *, protected: set[int] | None = None) -> PruneOrder:
    """Last N: every model-vocabulary id, highest first."""
    check_prunable(tok)
    prot = protected_ids(tok) if protected is None else protected
    ids = sorted((i for i in tok.vocab.values() if i not in prot), reverse=True)
    return PruneOrder("last-n", tuple(ids), tok.content_hash)


def frequency_order(
    tok: LoadedTokenizer, counts: np.ndarray, *, protected: set[int] | None = None
) -> PruneOrder:
    """Naive frequency: ascending (count, -id) — rarest first, ties to the higher id."""
    check_prunable(tok)
    prot = protected_ids(tok) if protected is None else protected
    ids = [i for i in tok.vocab.values() if i not in prot]
    c = _count_of(counts)
    ids.sort(key=lambda i: (c(i), -i))
    return PruneOrder("frequency", tuple(ids), tok.content_hash, {i: float(c(i)) for i in ids})


def _count_of(counts: np.ndarray | Mapping[int, float]) -> Callable[[int], float]:
    if isinstance(counts, Mapping):
        return lambda i: counts.get(i, 0)
    n = len(counts)
    return lambda i: int(counts[i]) if i < n else 0


def leaf_order(
    tok: LoadedTokenizer,
    priority: Callable[[int], float] | Mapping[int, float] | np.ndarray,
    *,
    propagate: bool = False,
    method: str = "leaf",
    structure: Any = None,
    protected: set[int] | None = None,
) -> PruneOrder:
    """Generic leaf pruning (Purason et al., Alg. 1): repeatedly pop the lowest-(priority, -id) *leaf*.

    A leaf is a token that is no component of any surviving merge; atomic tokens (the alphabet) are never
    output. With `propagate`, a popped token's priority (its corpus count) is added to its two parts, since
    removing it turns each occurrence into the pair.
    """
    check_prunable(tok)
    vs = structure if structure is not None else vocabulary_structure(tok)
    prot = protected_ids(tok) if protected is None else protected
    size = max(tok.id_to_token) + 1
    # dense per-id arrays (lists): much faster than dicts in the pop loop
    if isinstance(priority, np.ndarray):
        arr = np.zeros(size, dtype=np.float64)
        m = min(size, len(priority))
        arr[:m] = priority[:m]
    elif isinstance(priority, Mapping):
        arr = np.array([float(priority.get(i, 0.0)) for i in range(size)], dtype=np.float64)
    else:
        arr = np.array([float(priority(i)) for i in range(size)], dtype=np.float64)
    left, right, downstream0, atomic, in_vocab = _dense_structure(tok, vs, size)
    downstream = list(downstream0)
    is_prot = [False] * size
    for t in prot:
        if 0 <= t < size:
            is_prot[t] = True
    start = [x for x in vs.leaves if in_vocab[x] and not atomic[x]]
    integral = bool(
        np.isfinite(arr).all() and (arr == np.round(arr)).all() and np.abs(arr).max(initial=0) < 2**53
    )
    if integral:
        out, keys = _leaf_loop_int(arr, start, size, left, right, downstream, atomic, is_prot, propagate)
    else:
        out, keys = _leaf_loop(arr.tolist(), start, size, left, right, downstream, atomic, is_prot, propagate)
    return PruneOrder(method, tuple(out), tok.content_hash, keys)


def _leaf_loop_int(arr, start, size, left, right, downstream, atomic, is_prot, propagate):
    """Alg. 1 pop loop with integer priorities packed with the id into one int key (fast heap compares).

    key = priority * size + (size - 1 - id): ascending priority, then descending id.
    """
    prio = [int(v) for v in arr.tolist()]
    m1 = size - 1
    heap = [prio[x] * size + m1 - x for x in start]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    done = [False] * size
    out: list[int] = []
    keys: dict[int, float] = {}
    while heap:
        k, r = divmod(pop(heap), size)
        x = m1 - r
        if done[x] or downstream[x] > 0 or atomic[x]:
            continue
        if propagate and k != prio[x]:  # stale entry (its count grew after being pushed): re-push
            push(heap, prio[x] * size + r)
            continue
        done[x] = True
        if is_prot[x]:  # a protected token stays, and so do the parts it needs
            continue
        out.append(x)
        keys[x] = k
        lt = left[x]
        if lt < 0:
            continue
        rt = right[x]
        if propagate:
            prio[lt] += k
            prio[rt] += k
            prio[x] = 0
        downstream[lt] -= 1
        downstream[rt] -= 1
        if downstream[lt] <= 0 and not atomic[lt] and not done[lt]:
            push(heap, prio[lt] * size + m1 - lt)
        if rt != lt and downstream[rt] <= 0 and not atomic[rt] and not done[rt]:
            push(heap, prio[rt] * size + m1 - rt)
    return out, keys


def _leaf_loop(prio, start, size, left, right, downstream, atomic, is_prot, propagate):
    """Alg. 1 pop loop with (priority, -id) tuple keys (any real priorities)."""
    heap = [(prio[x], -x) for x in start]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    done = [False] * size
    out: list[int] = []
    keys: dict[int, float] = {}
    while heap:
        k, nx = pop(heap)
        x = -nx
        if done[x] or downstream[x] > 0 or atomic[x]:
            continue
        if propagate and k != prio[x]:
            push(heap, (prio[x], nx))
            continue
        done[x] = True
        if is_prot[x]:
            continue
        out.append(x)
        keys[x] = k
        lt = left[x]
        if lt < 0:
            continue
        rt = right[x]
        if propagate:
            prio[lt] += k
            prio[rt] += k
            prio[x] = 0.0
        downstream[lt] -= 1
        downstream[rt] -= 1
        if downstream[lt] <= 0 and not atomic[lt] and not done[lt]:
            push(heap, (prio[lt], -lt))
        if rt != lt and downstream[rt] <= 0 and not atomic[rt] and not done[rt]:
            push(heap, (prio[rt], -rt))
    return out, keys


@memoize(maxsize=4)
def _dense_structure(tok: LoadedTokenizer, vs, size: int) -> tuple[list, list, list, list, list]:
    """Per-id lists (left part, right part, downstream count, atomic, in model vocab), cached per structure."""
    n = len(vs.split)
    ts = np.fromiter(vs.split.keys(), dtype=np.int64, count=n)
    lr = np.fromiter((x for pair in vs.split.values() for x in pair), dtype=np.int64, count=2 * n).reshape(
        -1, 2
    )
    left = np.full(size, -1, dtype=np.int64)
    right = np.full(size, -1, dtype=np.int64)
    left[ts] = lr[:, 0]
    right[ts] = lr[:, 1]
    down = np.zeros(size, dtype=np.int64)
    if vs.downstream:
        dk = np.fromiter(vs.downstream.keys(), dtype=np.int64, count=len(vs.downstream))
        dv = np.fromiter(vs.downstream.values(), dtype=np.int64, count=len(vs.downstream))
        down[dk] = dv
    atomic = np.zeros(size, dtype=bool)
    if vs.atomic:
        atomic[np.fromiter(vs.atomic, dtype=np.int64, count=len(vs.atomic))] = True
    in_vocab = np.zeros(size, dtype=bool)
    in_vocab[np.fromiter(tok.vocab.values(), dtype=np.int64, count=len(tok.vocab))] = True
    return left.tolist(), right.tolist(), down.tolist(), atomic.tolist(), in_vocab.tolist()


def leaf_last_n_order(
    tok: LoadedTokenizer, *, structure: Any = None, protected: set[int] | None = None
) -> PruneOrder:
    """Leaf last-N: highest id first among the current leaves."""
    zeros = np.zeros(max(tok.id_to_token) + 1, dtype=np.float64)
    return leaf_order(tok, zeros, method="leaf-last-n", structure=structure, protected=protected)


def leaf_frequency_order(
    tok: LoadedTokenizer,
    counts: np.ndarray | Mapping[int, float],
    *,
    structure: Any = None,
    protected: set[int] | None = None,
) -> PruneOrder:
    """Leaf frequency (Purason et al., Alg. 1): rarest leaf first, counts moved to the parts of a pruned token."""
    return leaf_order(
        tok, counts, propagate=True, method="leaf-frequency", structure=structure, protected=protected
    )


def merge_counts(tok: LoadedTokenizer, texts: Iterable[str]) -> tuple[Counter, Counter]:
    """Replay BPE over the corpus: (final token counts by id, merge counts by (left_id, right_id)).

    The text goes through the tokenizer's own pipeline (added tokens split out, normalizer,
    pre-tokenizer); each distinct pre-token is replayed once with :class:`analysis.bpe.BPEReplay`
    (ignore_merges off) and weighted by its frequency. Added tokens count as final tokens.
    """
    replay = get_replay(tok, ignore_merges=False)
    words: Counter = Counter()
    added: Counter = Counter()
    any_text = False
    for line in texts:
        if not line:
            continue
        any_text = True
        for piece, is_added, _ in replay.pieces(line):
            if is_added:
                added[piece] += 1
            elif piece:
                words[piece] += 1
    if not any_text:
        raise DataError("the text sample is empty")
    vocab = tok.vocab
    tcounts: Counter = Counter()
    mcounts: Counter = Counter()
    for word, c in words.items():
        tokens, events = replay.tokenize_word(word)
        for t in tokens:
            tcounts[vocab[t]] += c
        for ev in events:
            mcounts[(vocab[ev.left], vocab[ev.right])] += c
    for content, c in added.items():
        i = tok.tokenizer.token_to_id(content)
        if i is not None:
            tcounts[i] += c
    return tcounts, mcounts


def merge_based_order(
    tok: LoadedTokenizer,
    texts: Iterable[str] | None = None,
    *,
    counts: tuple[Counter, Counter] | None = None,
    protected: set[int] | None = None,
) -> PruneOrder:
    """Merge-based pruning (Purason et al., Alg. 2): score = final count + every merge the token is a part of.

    Ascending by (score, -len(token), -id): a part always scores at least as much as the token built from
    it and is shorter, so only leaves go first.
    """
    check_prunable(tok)
    if counts is None:
        if texts is None:
            raise DataError("merge-based pruning needs a text sample")
        counts = merge_counts(tok, texts)
    tcounts, mcounts = counts
    score: Counter = Counter(tcounts)
    for (left, right), n in mcounts.items():
        score[left] += n
        score[right] += n
    prot = protected_ids(tok) if protected is None else protected
    ids = [i for t, i in tok.vocab.items() if i not in prot]
    id_to_tok = tok.id_to_token
    ids.sort(key=lambda i: (score.get(i, 0), -len(id_to_tok[i]), -i))
    return PruneOrder("merge-based", tuple(ids), tok.content_hash, {i: float(score.get(i, 0)) for i in ids})


def script_order(
    tok: LoadedTokenizer,
    allowed: Iterable[str] = ("Latin",),
    *,
    forbidden: Iterable[str] = (),
    protected: set[int] | None = None,
) -> PruneOrder:
    """Tokens with a character whose script is outside `allowed` (+Common/Inherited) or in `forbidden`.

    Highest id first. Byte-level fragments that are not whole UTF-8 characters are kept: they are shared
    by every script. The order only holds the matching tokens.
    """
    check_prunable(tok)
    allow = {_script_name(n) for n in allowed} | set(NEUTRAL_SCRIPTS)
    forbid = {_script_name(n) for n in forbidden}
    prot = protected_ids(tok) if protected is None else protected
    out = []
    for t, i in tok.vocab.items():
        if i in prot:
            continue
        try:
            text = tok.token_bytes(t).decode("utf-8")
        except UnicodeDecodeError:
            text = _whole_chars(tok.token_bytes(t))
        scripts = text_scripts(text)
        if (scripts - allow) or (scripts & forbid):
            out.append(i)
    out.sort(reverse=True)
    return PruneOrder("script", tuple(out), tok.content_hash)


def _script_name(name: str) -> str:
    """A script name as the Unicode table spells it (`Canadian_Aboriginal` → `Canadian Aboriginal`)."""
    found = find_script(name)
    if found is None:
        raise DataError(f"unknown Unicode script {name!r} (e.g. Latin, Cyrillic, Han, Arabic)")
    return found


def _whole_chars(bs: bytes) -> str:
    """The complete UTF-8 characters inside a byte string (partial ones at the edges dropped)."""
    return bs.decode("utf-8", errors="ignore")


def score_order(
    tok: LoadedTokenizer,
    scores: Mapping[int, float] | np.ndarray,
    *,
    structure_safe: bool = True,
    structure: Any = None,
    protected: set[int] | None = None,
) -> PruneOrder:
    """Lowest externally supplied score first (e.g. an under-trained score, negated so worst = lowest).

    With `structure_safe` (default) only current leaves are popped, so no token becomes unreachable; ids
    without a score count as +inf (pruned last, or never when they block nothing).
    """
    check_prunable(tok)
    get = _count_of(scores) if not isinstance(scores, Mapping) else (lambda i: scores.get(i, float("inf")))
    if isinstance(scores, np.ndarray):
        n = len(scores)
        get = lambda i: float(scores[i]) if i < n else float("inf")  # noqa: E731
    if structure_safe:
        return leaf_order(tok, get, method="score", structure=structure, protected=protected)
    prot = protected_ids(tok) if protected is None else protected
    ids = [i for i in tok.vocab.values() if i not in prot]
    ids.sort(key=lambda i: (get(i), -i))
    return PruneOrder("score", tuple(ids), tok.content_hash, {i: get(i) for i in ids})


@dataclass
class OrderInputs:
    """What an order may need besides the tokenizer: a text sample or its counts, scripts, scores, protected ids."""

    protected: set[int]
    texts: Sequence[str] | None = None
    counts: np.ndarray | None = None
    merges: tuple[Counter, Counter] | None = None
    allowed_scripts: Iterable[str] = ("Latin",)
    forbidden_scripts: Iterable[str] = ()
    scores: Mapping[int, float] | np.ndarray | None = None

    def token_counts(self, tok: LoadedTokenizer, method: str) -> np.ndarray:
        """The id counts of the text sample (counted here unless given)."""
        if self.counts is None:
            if self.texts is None:
                raise DataError(f"the {method} order needs a text sample")
            self.counts = token_counts(tok, self.texts)
        return self.counts


@dataclass(frozen=True)
class OrderSpec:
    """One pruning order of the registry: what the CLI offers, the Prune page lists and compute_order builds."""

    name: str
    description: str
    build: Callable[[LoadedTokenizer, OrderInputs], PruneOrder]
    #: never makes a surviving token unreachable (removes leaves of the merge graph only)
    structure_safe: bool = False
    #: (corpus statistic of analysis.jobs, compute_order keyword) for orders that need token frequencies
    corpus: tuple[str, str] | None = None
    #: the page's label when "name — description" is not enough
    label: str = ""


def _merge_based(tok: LoadedTokenizer, x: OrderInputs) -> PruneOrder:
    if x.texts is None and x.merges is None:
        raise DataError("the merge-based order needs a text sample")
    return merge_based_order(tok, x.texts, counts=x.merges, protected=x.protected)


def _score(tok: LoadedTokenizer, x: OrderInputs) -> PruneOrder:
    if x.scores is None:
        raise DataError(
            "the score order needs a score per token (the CLI's --scores FILE: JSON {id: score} or [score, ...])"
        )
    return score_order(tok, x.scores, protected=x.protected)


#: The pruning orders, in the order the CLI and the page list them.
ORDER_REGISTRY: dict[str, OrderSpec] = {
    spec.name: spec
    for spec in (
        OrderSpec(
            "last-n",
            "highest id first (naive)",
            lambda tok, x: last_n_order(tok, protected=x.protected),
        ),
        OrderSpec(
            "frequency",
            "rarest token first in the text mix (naive: may break merge paths)",
            lambda tok, x: frequency_order(tok, x.token_counts(tok, "frequency"), protected=x.protected),
            corpus=("token-ids", "counts"),
        ),
        OrderSpec(
            "leaf-last-n",
            "highest id first, but only leaves of the merge graph (Purason et al.)",
            lambda tok, x: leaf_last_n_order(tok, protected=x.protected),
            structure_safe=True,
        ),
        OrderSpec(
            "leaf-frequency",
            "rarest leaf first; a pruned token's count moves to its two parts (Purason et al., Alg. 1)",
            lambda tok, x: leaf_frequency_order(
                tok, x.token_counts(tok, "leaf-frequency"), protected=x.protected
            ),
            structure_safe=True,
            corpus=("token-ids", "counts"),
        ),
        OrderSpec(
            "merge-based",
            "rarest first counting every merge a token takes part in (Purason et al., Alg. 2)",
            _merge_based,
            structure_safe=True,
            corpus=("merge-counts", "merges"),
        ),
        OrderSpec(
            "script",
            "tokens containing a character of a script outside the allowed set, highest id first",
            lambda tok, x: script_order(
                tok, x.allowed_scripts, forbidden=x.forbidden_scripts, protected=x.protected
            ),
            structure_safe=True,
        ),
        OrderSpec(
            "score",
            "lowest externally supplied score first (e.g. under-trained tokens), leaves only",
            _score,
            label="under-trained first — lowest magikarp indicator of a model's embeddings first, leaves only",
        ),
    )
}
ORDERS = tuple(ORDER_REGISTRY)
#: Orders that never make a surviving token unreachable (they only remove leaves of the merge graph).
STRUCTURE_SAFE_ORDERS = tuple(n for n, o in ORDER_REGISTRY.items() if o.structure_safe)
#: Orders that need token frequencies from a text sample.
CORPUS_ORDERS = tuple(n for n, o in ORDER_REGISTRY.items() if o.corpus)
ORDER_DESCRIPTIONS = {n: o.description for n, o in ORDER_REGISTRY.items()}
#: What the Prune page shows for each order.
ORDER_LABELS = {n: o.label or f"{n} — {o.description}" for n, o in ORDER_REGISTRY.items()}


def compute_order(
    tok: LoadedTokenizer,
    method: str,
    texts: Sequence[str] | None = None,
    *,
    counts: np.ndarray | None = None,
    merges: tuple[Counter, Counter] | None = None,
    allowed_scripts: Iterable[str] = ("Latin",),
    forbidden_scripts: Iterable[str] = (),
    scores: Mapping[int, float] | np.ndarray | None = None,
    keep_added: bool = True,
    keep_alphabet: bool = True,
) -> PruneOrder:
    """Compute the pruning order `method` (one of ORDERS) for a tokenizer and (when needed) a text sample.

    The corpus orders take their frequencies from `texts`, or already counted: `counts` (an id count vector,
    :func:`token_counts` — frequency, leaf-frequency) and `merges` ((final-token Counter, merge Counter),
    :func:`merge_counts` — merge-based), as the `token-ids` and `merge-counts` corpus statistics of
    :mod:`analysis.jobs` give them for corpora of any size.
    """
    spec = ORDER_REGISTRY.get(method)
    if spec is None:
        raise DataError(f"unknown pruning order {method!r}; choose one of {', '.join(ORDERS)}")
    check_prunable(tok)
    prot = protected_ids(tok, keep_added=keep_added, keep_alphabet=keep_alphabet)
    inputs = OrderInputs(prot, texts, counts, merges, allowed_scripts, forbidden_scripts, scores)
    return spec.build(tok, inputs)
