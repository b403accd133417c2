"""Vocabulary pruning: pruning orders, removal that keeps the tokenizer valid, curves, prune+extend.

Paper 000 §3.2 + App. A and methods.md §5. An *order* lists model-vocabulary ids, first = pruned first;
pruning N tokens removes the first N. Orders: last-N by id, naive frequency, leaf last-N, leaf frequency
(Alg. 1), merge-based (Alg. 2), by script, and by an externally supplied score. Removal drops every merge
that touches a pruned token, renumbers model + added ids contiguously in old-id order, fixes
`added_tokens` and the post-processor ids, and returns the old → new id map.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import numpy as np

from .bpe import require_bpe
from .errors import DataError
from .progress import Progress, report
from .tokenizer import BYTE_TO_CHAR, LoadedTokenizer
from .unicode import NEUTRAL_SCRIPTS, find_script, text_scripts

ORDERS = ("last-n", "frequency", "leaf-last-n", "leaf-frequency", "merge-based", "script", "score")
#: Orders that never make a surviving token unreachable (they only remove leaves of the merge graph).
STRUCTURE_SAFE_ORDERS = ("leaf-last-n", "leaf-frequency", "merge-based", "script")
#: Orders that need token frequencies from a text sample.
CORPUS_ORDERS = ("frequency", "leaf-frequency", "merge-based")

ORDER_DESCRIPTIONS = {
    "last-n": "highest id first (naive)",
    "frequency": "rarest token first in the text mix (naive: may break merge paths)",
    "leaf-last-n": "highest id first, but only leaves of the merge graph (paper 000)",
    "leaf-frequency": "rarest leaf first; a pruned token's count moves to its two parts (paper 000 Alg. 1)",
    "merge-based": "rarest first counting every merge a token takes part in (paper 000 Alg. 2)",
    "script": "tokens containing a character of a script outside the allowed set, highest id first",
    "score": "lowest externally supplied score first (e.g. under-trained tokens), leaves only",
}


# --------------------------------------------------------------------------------------------------
# Helpers: supported tokenizers, protected ids, text mixes, token counts
# --------------------------------------------------------------------------------------------------
def check_prunable(tok: LoadedTokenizer) -> None:
    """Raise UnsupportedTokenizerError unless the tokenizer is a BPE model (byte-level or SentencePiece-style)."""
    require_bpe(tok, "pruning")


def alphabet_ids(tok: LoadedTokenizer) -> set[int]:
    """Ids of the base alphabet that byte fallback / byte-level encoding relies on (never pruned by default)."""
    out: set[int] = set()
    if tok.is_byte_level:
        for ch in BYTE_TO_CHAR.values():
            i = tok.vocab.get(ch)
            if i is not None:
                out.add(i)
    if tok.byte_fallback:
        for b in range(256):
            i = tok.vocab.get(f"<0x{b:02X}>")
            if i is not None:
                out.add(i)
    return out


def protected_ids(tok: LoadedTokenizer, *, keep_added: bool = True, keep_alphabet: bool = True) -> set[int]:
    """Ids no order outputs: added/special tokens, unk/bos/eos/pad, and (by default) the byte alphabet."""
    out: set[int] = set()
    if keep_added:
        out |= set(tok.added_ids)
    else:
        out |= {a.id for a in tok.added_tokens if a.special}
    names = [tok.unk_token]
    for key in ("unk_token", "bos_token", "eos_token", "pad_token"):
        v = tok.config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        names.append(v)
    for name in names:
        if isinstance(name, str):
            i = tok.tokenizer.token_to_id(name)
            if i is not None:
                out.add(i)
    out |= _post_processor_ids(tok)
    if keep_alphabet:
        out |= alphabet_ids(tok)
    return out


def _post_processor_ids(tok: LoadedTokenizer) -> set[int]:
    out: set[int] = set()
    for s in _post_processor_tokens(tok.post_processor):
        i = tok.tokenizer.token_to_id(s)
        if i is not None:
            out.add(i)
    return out


def _post_processor_tokens(pp: dict | None) -> set[str]:
    """Token strings the post-processor refers to (TemplateProcessing special tokens, Bert/Roberta cls/sep)."""
    out: set[str] = set()
    if not isinstance(pp, dict):
        return out
    if pp.get("type") == "Sequence":
        for p in pp.get("processors") or []:
            out |= _post_processor_tokens(p)
        return out
    for key in ("cls", "sep"):
        if isinstance(pp.get(key), list) and pp[key]:
            out.add(pp[key][0])
    for spec in (pp.get("special_tokens") or {}).values():
        out.update(spec.get("tokens") or [])
    return out


def mix_texts(
    parts: Sequence[Sequence[str]], weights: Sequence[float] | None = None, *, by: str = "bytes"
) -> list[str]:
    """A text mix with the given shares (default equal): each part is cut so the shares hold.

    `by="bytes"`: shares of UTF-8 bytes (lines kept whole, in order) — for texts of any kind.
    `by="lines"`: shares of lines — for parallel data such as FLORES, where `mix_texts([et[:800], en[:800]],
    by="lines")` is exactly the first 800 lines of each.
    """
    if by not in ("bytes", "lines"):
        raise DataError("mix shares are counted in 'bytes' or 'lines'")
    parts = [[ln for ln in p if ln.strip()] for p in parts]
    if not parts or any(not p for p in parts):
        raise DataError("every text in the mix must contain at least one non-empty line")
    w = list(weights) if weights is not None else [1.0] * len(parts)
    if len(w) != len(parts) or any(x <= 0 for x in w):
        raise DataError("give one positive weight per text")

    def size(ln: str) -> int:
        return 1 if by == "lines" else len(ln.encode("utf-8")) + 1

    sizes = [sum(size(ln) for ln in p) for p in parts]
    unit = min(s / x for s, x in zip(sizes, w))  # bytes (lines) per unit weight that every part can supply
    out: list[str] = []
    for p, x in zip(parts, w):
        budget = unit * x
        used = 0
        for ln in p:
            b = size(ln)
            if used and used + b > budget * 1.0001:
                break
            out.append(ln)
            used += b
    return out


def _counting_tokenizer(tok: LoadedTokenizer):
    """A private Rust tokenizer with ignore_merges off and no dropout (for counting and metrics)."""
    return tok.fresh_tokenizer(merges_only=True)


def token_counts(
    tok: LoadedTokenizer, texts: Iterable[str], *, add_special_tokens: bool = True, batch_size: int = 2048
) -> np.ndarray:
    """Frequency of every id (index = id) when encoding the texts with ignore_merges forced off.

    Encoding adds special tokens (e.g. BOS) as the model sees them, so those are counted too (methods.md §5).
    """
    t = _counting_tokenizer(tok)
    size = max(tok.id_to_token) + 1 if tok.id_to_token else 0
    counts = np.zeros(size, dtype=np.int64)
    batch: list[str] = []
    any_text = False

    def flush() -> None:
        if not batch:
            return
        enc = t.encode_batch_fast(batch, add_special_tokens=add_special_tokens)
        ids = np.fromiter((i for e in enc for i in e.ids), dtype=np.int64)
        if ids.size:
            counts[:size] += np.bincount(ids, minlength=size)[:size]
        batch.clear()

    for line in texts:
        if not line:
            continue
        any_text = True
        batch.append(line)
        if len(batch) >= batch_size:
            flush()
    flush()
    if not any_text:
        raise DataError("the text sample is empty")
    return counts


def bytes_per_token(tok: LoadedTokenizer, lines: Sequence[str]) -> float:
    """Corpus-level UTF-8 bytes / tokens (no special tokens), via analysis.metrics when it exists."""
    try:
        from . import metrics  # type: ignore[attr-defined]

        fn = getattr(metrics, "bytes_per_token", None)
    except ImportError:
        fn = None
    if fn is not None:
        return float(fn(tok, lines))
    lines = [ln for ln in lines if ln]
    if not lines:
        raise DataError("no text to measure bytes/token on")
    enc = tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)
    n_tok = sum(len(e.ids) for e in enc)
    n_bytes = sum(len(ln.encode("utf-8")) for ln in lines)
    return n_bytes / max(n_tok, 1)


# --------------------------------------------------------------------------------------------------
# Orders
# --------------------------------------------------------------------------------------------------
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
    """Generic leaf pruning (paper 000 Alg. 1): repeatedly pop the lowest-(priority, -id) *leaf*.

    A leaf is a token that is no component of any surviving merge; atomic tokens (the alphabet) are never
    output. With `propagate`, a popped token's priority (its corpus count) is added to its two parts, since
    removing it turns each occurrence into the pair.
    """
    check_prunable(tok)
    vs = structure if structure is not None else vocab_structure(tok)
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


_DENSE_CACHE: dict[tuple[str, int, int], tuple] = {}


def _dense_structure(tok: LoadedTokenizer, vs, size: int) -> tuple[list, list, list, list, list]:
    """Per-id lists (left part, right part, downstream count, atomic, in model vocab), cached per structure."""
    key = (tok.content_hash, id(vs), size)
    hit = _DENSE_CACHE.get(key)
    if hit is not None and hit[0] is vs:
        return hit[1]
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
    arrays = (left.tolist(), right.tolist(), down.tolist(), atomic.tolist(), in_vocab.tolist())
    if len(_DENSE_CACHE) >= 4:
        _DENSE_CACHE.pop(next(iter(_DENSE_CACHE)))
    _DENSE_CACHE[key] = (vs, arrays)
    return arrays


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
    """Leaf frequency (paper 000 Alg. 1): rarest leaf first, counts moved to the parts of a pruned token."""
    return leaf_order(
        tok, counts, propagate=True, method="leaf-frequency", structure=structure, protected=protected
    )


def merge_counts(tok: LoadedTokenizer, texts: Iterable[str]) -> tuple[Counter, Counter]:
    """Replay BPE over the corpus: (final token counts by id, merge counts by (left_id, right_id)).

    The text goes through the tokenizer's own pipeline (added tokens split out, normalizer,
    pre-tokenizer); each distinct pre-token is replayed once with :class:`analysis.bpe.BPEReplay`
    (ignore_merges off) and weighted by its frequency. Added tokens count as final tokens.
    """
    from .bpe import get_replay

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
    """Merge-based pruning (paper 000 Alg. 2): score = final count + every merge the token is a part of.

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


def vocab_structure(tok: LoadedTokenizer) -> Any:
    """The merge-graph structure of the vocabulary (analysis.bpe.vocabulary_structure)."""
    from .bpe import vocabulary_structure

    return vocabulary_structure(tok)


def compute_order(
    tok: LoadedTokenizer,
    method: str,
    texts: Sequence[str] | None = None,
    *,
    counts: np.ndarray | None = None,
    allowed_scripts: Iterable[str] = ("Latin",),
    forbidden_scripts: Iterable[str] = (),
    scores: Mapping[int, float] | np.ndarray | None = None,
    keep_added: bool = True,
    keep_alphabet: bool = True,
) -> PruneOrder:
    """Compute the pruning order `method` (one of ORDERS) for a tokenizer and (when needed) a text sample."""
    check_prunable(tok)
    prot = protected_ids(tok, keep_added=keep_added, keep_alphabet=keep_alphabet)
    if method in ("frequency", "leaf-frequency") and counts is None:
        if texts is None:
            raise DataError(f"the {method} order needs a text sample")
        counts = token_counts(tok, texts)
    if method == "last-n":
        return last_n_order(tok, protected=prot)
    if method == "frequency":
        return frequency_order(tok, counts, protected=prot)
    if method == "leaf-last-n":
        return leaf_last_n_order(tok, protected=prot)
    if method == "leaf-frequency":
        return leaf_frequency_order(tok, counts, protected=prot)
    if method == "merge-based":
        if texts is None:
            raise DataError("the merge-based order needs a text sample")
        return merge_based_order(tok, texts, protected=prot)
    if method == "script":
        return script_order(tok, allowed_scripts, forbidden=forbidden_scripts, protected=prot)
    if method == "score":
        if scores is None:
            raise DataError("the score order needs scores")
        return score_order(tok, scores, protected=prot)
    raise DataError(f"unknown pruning order {method!r}; choose one of {', '.join(ORDERS)}")


# --------------------------------------------------------------------------------------------------
# Removal
# --------------------------------------------------------------------------------------------------
@dataclass
class PruneResult:
    """A pruned tokenizer and how its ids relate to the original's."""

    tokenizer: LoadedTokenizer
    #: old id → new id for every surviving token (model + added)
    id_map: dict[int, int]
    removed: list[int]
    merges_removed: int

    @property
    def id_map_array(self) -> np.ndarray:
        """old id → new id as an array (-1 for pruned ids)."""
        size = max(self.id_map) + 1 if self.id_map else 0
        size = max(size, (max(self.removed) + 1) if self.removed else 0)
        arr = np.full(size, -1, dtype=np.int64)
        for o, n in self.id_map.items():
            arr[o] = n
        return arr


class _Pruner:
    """Reusable removal for one tokenizer: parses the document once, then builds pruned copies fast."""

    def __init__(self, tok: LoadedTokenizer) -> None:
        check_prunable(tok)
        self.tok = tok
        self.base = json.loads(tok.to_json())  # private copy; only its top level is reused
        vocab = tok.vocab
        self.size = max(max(vocab.values(), default=-1), max(tok.added_ids, default=-1)) + 1
        self.present = np.zeros(self.size, dtype=bool)
        self.present[list(vocab.values())] = True
        self.present[list(tok.added_ids)] = True
        self.vocab_items = list(vocab.items())
        self.vocab_ids = np.fromiter((i for _, i in self.vocab_items), dtype=np.int64, count=len(vocab))
        merges = tok.merges
        self.merge_lists = [[a, b] for a, b in merges]
        get = vocab.get
        self.merge_ids = np.array(
            [(get(a, -1), get(b, -1), get(a + b, -1)) for a, b in merges], dtype=np.int64
        ).reshape(-1, 3)
        self.added = []
        for entry in self.base.get("added_tokens") or []:
            self.added.append((tok.tokenizer.token_to_id(entry["content"]), entry))
        self.pp_tokens = _post_processor_tokens(tok.post_processor)
        self.token_to_id = tok.tokenizer.token_to_id

    def prune(self, remove: Iterable[int], name: str | None = None, validate: bool = True) -> PruneResult:
        tok = self.tok
        rem_list = sorted({int(i) for i in remove})
        rem = np.zeros(self.size, dtype=bool)
        if rem_list:
            arr = np.asarray(rem_list, dtype=np.int64)
            bad = arr[(arr < 0) | (arr >= self.size)]
            if bad.size == 0:
                bad = arr[~self.present[arr]]
            if bad.size:
                raise DataError(f"ids not in the vocabulary: {bad[:10].tolist()}")
            rem[arr] = True
        needed = self.pp_tokens | ({tok.unk_token} if tok.unk_token else set())
        blocked = [s for s in needed if (i := self.token_to_id(s)) is not None and rem[i]]
        if blocked:
            raise DataError(
                f"cannot prune tokens the tokenizer needs (unk / post-processor): {sorted(blocked)}"
            )
        surv = self.present & ~rem
        new_ids = np.cumsum(surv) - 1  # old id → new id where surv
        survivors = np.flatnonzero(surv)
        id_map = dict(zip(survivors.tolist(), new_ids[survivors].tolist()))
        keep_v = ~rem[self.vocab_ids]
        nv = new_ids[self.vocab_ids].tolist()
        vocab = {t: nv[k] for k, (t, _) in enumerate(self.vocab_items) if keep_v[k]}
        m = self.merge_ids
        if len(m):
            ok = (m >= 0).all(axis=1)
            safe = np.where(m >= 0, m, 0)
            ok &= ~(rem[safe[:, 0]] | rem[safe[:, 1]] | rem[safe[:, 2]])
            kept_idx = np.flatnonzero(ok).tolist()
        else:
            kept_idx = []
        ml = self.merge_lists
        doc = dict(self.base)
        model = dict(self.base["model"])
        model["vocab"] = vocab
        model["merges"] = [ml[k] for k in kept_idx]
        doc["model"] = model
        added = []
        for i, entry in self.added:
            if i is None or rem[i]:
                continue
            e = dict(entry)
            e["id"] = id_map[i]
            added.append(e)
        doc["added_tokens"] = added
        doc["post_processor"] = _remap_post_processor(self.base.get("post_processor"), tok, id_map)
        new = LoadedTokenizer.from_document(
            doc,
            name=name or f"{tok.name}-pruned{len(rem_list)}",
            source=f"pruned from {tok.name}",
            config=_remap_config(tok.config, tok, id_map),
        )
        if validate:
            _validate(new, tok, id_map)
        return PruneResult(new, id_map, rem_list, len(ml) - len(kept_idx))


def _remap_post_processor(pp, tok: LoadedTokenizer, id_map: dict[int, int]):
    """A copy of the post-processor with every stored id moved to its new id."""
    if not isinstance(pp, dict):
        return pp
    pp = json.loads(json.dumps(pp))

    def new_id(s: str, old: int | None = None) -> int:
        i = tok.tokenizer.token_to_id(s)
        if i is None:
            i = old
        return id_map[i]

    def walk(node: dict) -> None:
        if node.get("type") == "Sequence":
            for p in node.get("processors") or []:
                walk(p)
            return
        for key in ("cls", "sep"):
            if isinstance(node.get(key), list) and len(node[key]) == 2:
                node[key][1] = new_id(node[key][0], node[key][1])
        for spec in (node.get("special_tokens") or {}).values():
            toks = spec.get("tokens") or []
            ids = spec.get("ids") or []
            spec["ids"] = [new_id(t, o) for t, o in zip(toks, ids)]

    walk(pp)
    return pp


def _remap_config(config: dict, tok: LoadedTokenizer, id_map: dict[int, int]) -> dict:
    """tokenizer_config.json with `added_tokens_decoder` keyed by the new ids (pruned entries dropped)."""
    cfg = dict(config)
    dec = cfg.get("added_tokens_decoder")
    if isinstance(dec, dict):
        new_dec = {}
        for k, v in dec.items():
            try:
                old = int(k)
            except ValueError:
                continue
            if old in id_map:
                new_dec[str(id_map[old])] = v
        cfg["added_tokens_decoder"] = new_dec
    return cfg


def _validate(new: LoadedTokenizer, old: LoadedTokenizer, id_map: dict[int, int]) -> None:
    """Check that every surviving token string has exactly its mapped id and ids are contiguous."""
    n = len(id_map)
    if new.vocab_size != n:
        raise AssertionError(f"pruned vocab size {new.vocab_size} != survivors {n}")
    t = new.tokenizer
    for o, nid in id_map.items():
        if t.id_to_token(nid) != old.id_to_token[o]:
            raise AssertionError(f"id {o} → {nid}: {old.id_to_token[o]!r} became {t.id_to_token(nid)!r}")


def prune(
    tok: LoadedTokenizer, remove: Iterable[int], *, name: str | None = None, validate: bool = True
) -> PruneResult:
    """Remove the given ids: drop merges touching them, renumber contiguously, fix added tokens + post-processor."""
    return _Pruner(tok).prune(remove, name=name, validate=validate)


def prune_by_order(
    tok: LoadedTokenizer, order: PruneOrder, n: int, *, name: str | None = None
) -> PruneResult:
    """Remove the first n ids of an order."""
    if order.tokenizer_hash != tok.content_hash:
        raise DataError("this pruning order was computed for another tokenizer")
    return prune(tok, order.prefix(n), name=name)


# --------------------------------------------------------------------------------------------------
# Curves: many N from one order
# --------------------------------------------------------------------------------------------------
@dataclass
class CurvePoint:
    """Metrics of the tokenizer pruned by the first `n` tokens of an order."""

    n: int
    vocab_size: int
    bytes_per_token: dict[str, float]
    unreachable: int | None


def prune_curve(
    tok: LoadedTokenizer,
    order: PruneOrder,
    ns: Sequence[int],
    eval_texts: Mapping[str, Sequence[str]],
    *,
    stt: bool = True,
    progress: Progress | None = None,
) -> list[CurvePoint]:
    """Bytes/token per language (and STT-unreachable count) for each N of one order.

    Fast path: ids are not renumbered (bytes/token and reachability do not depend on them), so each point
    only builds a new Rust BPE model from the surviving vocabulary and merges and swaps it into one private
    copy of the tokenizer; the JSON document is never re-serialised or re-parsed.
    """
    if order.tokenizer_hash != tok.content_hash:
        raise DataError("this pruning order was computed for another tokenizer")
    fast = _FastPruner(tok)
    texts = {k: [ln for ln in v if ln] for k, v in eval_texts.items()}
    n_bytes = {k: sum(len(ln.encode("utf-8")) for ln in v) for k, v in texts.items()}
    for k, v in texts.items():
        if not v:
            raise DataError(f"no text to measure bytes/token on for {k}")
    out = []
    ns = sorted(set(int(n) for n in ns))
    for j, n in enumerate(ns):
        rust, kept = fast.tokenizer(order.prefix(n))
        bpt = {}
        for k, lines in texts.items():
            enc = rust.encode_batch_fast(lines, add_special_tokens=False)
            n_tok = sum(len(e.ids) for e in enc)
            bpt[k] = n_bytes[k] / n_tok if n_tok else float("nan")
        unreach = fast.unreachable_count(rust, kept) if stt else None
        out.append(CurvePoint(n, tok.vocab_size - n, bpt, unreach))
        report(progress, j + 1, len(ns), f"N = {n:,}")
    return out


class _FastPruner:
    """Swap pruned BPE models into one private tokenizer copy (original ids kept) for fast measurements."""

    def __init__(self, tok: LoadedTokenizer) -> None:
        import tokenizers

        check_prunable(tok)
        self.tok = tok
        self.rust = tok.fresh_tokenizer()
        m = tok.model
        self.kwargs = dict(
            unk_token=m.get("unk_token"),
            continuing_subword_prefix=m.get("continuing_subword_prefix"),
            end_of_word_suffix=m.get("end_of_word_suffix"),
            fuse_unk=bool(m.get("fuse_unk", False)),
            byte_fallback=bool(m.get("byte_fallback", False)),
        )
        self.kwargs = {k: v for k, v in self.kwargs.items() if v is not None}
        self.ignore_merges = bool(m.get("ignore_merges", False))
        self.BPE = tokenizers.models.BPE
        vocab = tok.vocab
        self.vocab_items = list(vocab.items())
        self.vocab_ids = np.fromiter((i for _, i in self.vocab_items), dtype=np.int64, count=len(vocab))
        self.size = max(tok.id_to_token) + 1
        self.merges = tok.merges
        get = vocab.get
        self.merge_ids = np.array(
            [(get(a, -1), get(b, -1), get(a + b, -1)) for a, b in self.merges], dtype=np.int64
        ).reshape(-1, 3)
        excl = set(tok.added_ids)
        added_contents = {a.content for a in tok.added_tokens}
        for s, i in vocab.items():
            if s in added_contents or s == tok.unk_token or tok.is_byte_piece(s):
                excl.add(i)
        self.excluded = excl

    def model(self, remove: Iterable[int], ignore_merges: bool | None = None) -> Any:
        """A BPE model without the removed ids (and every merge touching them); ids unchanged."""
        rem = np.zeros(self.size, dtype=bool)
        r = list(remove)
        if r:
            rem[np.asarray(r, dtype=np.int64)] = True
        keep_v = (~rem[self.vocab_ids]).tolist()
        vocab = dict(compress(self.vocab_items, keep_v))
        mi = self.merge_ids
        ok = (mi >= 0).all(axis=1)
        safe = np.where(mi >= 0, mi, 0)
        ok &= ~(rem[safe[:, 0]] | rem[safe[:, 1]] | rem[safe[:, 2]])
        merges = list(compress(self.merges, ok.tolist()))
        im = self.ignore_merges if ignore_merges is None else ignore_merges
        return self.BPE(vocab, merges, ignore_merges=im, **self.kwargs), vocab

    def tokenizer(self, remove: Iterable[int]) -> Any:
        """The private tokenizer copy with the pruned model swapped in, plus the surviving vocabulary."""
        model, vocab = self.model(remove)
        self.rust.model = model
        return self.rust, vocab

    def unreachable_count(self, rust: Any, vocab: dict[str, int]) -> int:
        """STT on the swapped-in model (ignore_merges off, no dropout): the analysis.reachability rules."""
        model = rust.model
        was = model.ignore_merges
        model.ignore_merges = False
        try:
            excl = self.excluded
            bad = 0
            for s, i in vocab.items():
                if i in excl:
                    continue
                toks = model.tokenize(s)
                if len(toks) != 1 or toks[0].id != i:
                    bad += 1
            return bad
        finally:
            model.ignore_merges = was


def unreachable_ids(tok: LoadedTokenizer) -> set[int]:
    """STT-unreachable model-vocabulary ids (analysis.reachability)."""
    from .bpe import unreachable_ids as _u

    return _u(tok)


def curve_points(max_n: int, k: int = 20) -> list[int]:
    """k evenly spaced N from 0 to max_n (inclusive)."""
    if max_n <= 0:
        return [0]
    return sorted({round(max_n * j / (k - 1)) for j in range(k)}) if k > 1 else [max_n]


# --------------------------------------------------------------------------------------------------
# Prune-then-extend / extend-then-prune (constant vocabulary size, paper 000 Table 4)
# --------------------------------------------------------------------------------------------------
@dataclass
class PruneExtendResult:
    """The result of pruning and extending by the same number of tokens."""

    tokenizer: LoadedTokenizer
    pruned: list[str]
    added: list[str]
    #: old id → new id for tokens of the original tokenizer that survive
    id_map: dict[int, int]


def _extension_plan(
    base: LoadedTokenizer, texts: Sequence[str], n: int, method: str, max_token_length: int | None
):
    from .extension import plan

    return plan(base, method, list(texts), n, max_token_length=max_token_length)


def prune_then_extend(
    tok: LoadedTokenizer,
    order: PruneOrder,
    n: int,
    extension_texts: Sequence[str],
    *,
    n_extend: int | None = None,
    method: str = "continued",
    max_token_length: int | None = None,
) -> PruneExtendResult:
    """Prune the first n tokens of `order`, then extend by n (default) with continued BPE training.

    Keeps the vocabulary size constant (paper 000 Table 4). Extension appends ids, so surviving tokens keep
    their pruned ids and `id_map` maps the original ids straight to the final ones.
    """
    res = prune_by_order(tok, order, n)
    k = n if n_extend is None else n_extend
    if k <= 0:
        return PruneExtendResult(res.tokenizer, [tok.id_to_token[i] for i in res.removed], [], res.id_map)
    ext = _extension_plan(res.tokenizer, extension_texts, k, method, max_token_length).apply(k)
    final = ext.tokenizer.with_source(name=f"{tok.name} -{n} ({order.method}) +{ext.n_added} ({method})")
    return PruneExtendResult(final, [tok.id_to_token[i] for i in res.removed], list(ext.added), res.id_map)


def extend_then_prune(
    tok: LoadedTokenizer,
    n: int,
    extension_texts: Sequence[str],
    prune_method: str,
    prune_texts: Sequence[str] | None = None,
    *,
    method: str = "continued",
    protect_new: bool = True,
    max_token_length: int | None = None,
) -> PruneExtendResult:
    """Extend by n tokens first, then prune n with `prune_method` computed on the extended tokenizer.

    With `protect_new` the freshly added tokens are never pruned (only original tokens make room).
    """
    if prune_method in CORPUS_ORDERS and prune_texts is None:
        raise DataError(f"the {prune_method} order needs a text sample")
    ext = _extension_plan(tok, extension_texts, n, method, max_token_length).apply(n)
    et = ext.tokenizer
    prot = protected_ids(et) | (set(ext.added_ids) if protect_new else set())
    counts = token_counts(et, prune_texts) if prune_method in ("frequency", "leaf-frequency") else None
    if prune_method == "last-n":
        order = last_n_order(et, protected=prot)
    elif prune_method == "frequency":
        order = frequency_order(et, counts, protected=prot)
    elif prune_method == "leaf-last-n":
        order = leaf_last_n_order(et, protected=prot)
    elif prune_method == "leaf-frequency":
        order = leaf_frequency_order(et, counts, protected=prot)
    elif prune_method == "merge-based":
        order = merge_based_order(et, prune_texts, protected=prot)
    else:
        raise DataError(f"extend-then-prune supports {', '.join(ORDERS[:5])}; not {prune_method!r}")
    res = prune_by_order(et, order, n)
    # original id → id in the extended tokenizer is the identity (extension appends), then the prune map
    id_map = {o: res.id_map[o] for o in tok.id_to_token if o in res.id_map}
    added = [t for t, i in zip(ext.added, ext.added_ids) if i in res.id_map]
    final = res.tokenizer.with_source(name=f"{tok.name} +{ext.n_added} ({method}) -{n} ({prune_method})")
    return PruneExtendResult(final, [et.id_to_token[i] for i in res.removed], added, id_map)
