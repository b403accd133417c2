"""The vocabulary structure of a BPE tokenizer: how each token is built by the merges.

For every produced token its final merge (split into two parts, and that merge's rank), its depth (merge levels
down to the alphabet), the atomic tokens (the alphabet: no merge makes them), the leaves (tokens no other
token's final merge uses), downstream counts (how many final merges use a token), the STT-unreachable tokens
and the dead merges (ranks that never fire when the vocabulary strings are replayed).

:func:`vocabulary_structure` computes it with array code instead of replaying every vocabulary string (see its
docstring), cached in memory and on disk (flat id lists as JSON, never unpickled).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.core.cache import DiskCache, memoize
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .replay import BPEReplay, SortedPairs, get_replay, merge_arrays, pair_stride, require_bpe
from .stt import stt_result


@dataclass(eq=False)
class VocabStructure:
    """How the vocabulary is built: merge splits, alphabet, leaves, downstream counts, dead merges.

    Compared and hashed by identity (one structure per tokenizer, memoised), so caches can key on it."""

    split: dict[int, tuple[int, int]]
    atomic: set[int]
    leaves: set[int]
    downstream: dict[int, int]
    unreachable: set[int]
    depth: dict[int, int]
    final_rank: dict[int, int]
    dead_merges: list[int]
    built_on: dict[int, list[int]] = field(default_factory=dict)

    def children_of(self, tid: int) -> list[int]:
        """Produced tokens whose final merge uses `tid` as a component (index built on first use)."""
        if not self.built_on and self.split:
            idx: dict[int, list[int]] = {}
            for t, (a, b) in self.split.items():
                idx.setdefault(a, []).append(t)
                if b != a:
                    idx.setdefault(b, []).append(t)
            self.built_on = idx
        return self.built_on.get(tid, [])


def vocabulary_structure(tok: LoadedTokenizer, *, disk_cache: bool = True) -> VocabStructure:
    """Merge split, depth, final rank, atomics, leaves, downstream counts and dead merges.

    Equivalent to replaying every vocabulary string step by step and recording the first merge that
    produces each token, computed faster: reachability comes from the Rust model (STT); a produced
    token's split is its only candidate merge whose parts are reachable, and where several remain, the
    one across whose split point no merge can fire before it (checked on the parts' merge-tree spines;
    exact when merge ranks grow along every tree, which is verified — otherwise the step-wise replay
    decides).
    """
    require_bpe(tok, "vocabulary structure")
    return _structure(tok, disk_cache)


#: vocabulary structures on disk, as flat id lists (JSON; never unpickled)
_STRUCT_DISK = DiskCache("vocab-structure", version=2)


@memoize(maxsize=4)
def _structure(tok: LoadedTokenizer, disk_cache: bool) -> VocabStructure:
    hit = _disk_load(tok.content_hash) if disk_cache else None
    if hit is not None:
        return hit
    res = _vocabulary_structure(tok)
    if disk_cache:
        _disk_save(tok.content_hash, res)
    return res


def _disk_load(key: str) -> VocabStructure | None:
    """A vocabulary structure from the disk store (None when absent or malformed)."""
    d = _STRUCT_DISK.get(key)
    try:
        tl, al, bl, rl, dl = d["tokens"], d["lefts"], d["rights"], d["ranks"], d["depths"]
        if not len(tl) == len(al) == len(bl) == len(rl) == len(dl):
            return None
        atomic = d["atomic"]
        depth = dict.fromkeys(atomic, 0)
        depth.update(zip(tl, dl))
        return VocabStructure(
            split=dict(zip(tl, zip(al, bl))),
            atomic=set(atomic),
            leaves=set(d["leaves"]),
            downstream=dict(zip(d["used"], d["used_counts"])),
            unreachable=set(d["unreachable"]),
            depth=depth,
            final_rank=dict(zip(tl, rl)),
            dead_merges=list(d["dead_merges"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _disk_save(key: str, obj: VocabStructure) -> None:
    """Store a vocabulary structure as flat id lists (best effort)."""
    tl = list(obj.split)
    _STRUCT_DISK.put(
        key,
        {
            "tokens": tl,
            "lefts": [obj.split[t][0] for t in tl],
            "rights": [obj.split[t][1] for t in tl],
            "ranks": [obj.final_rank[t] for t in tl],
            "depths": [obj.depth[t] for t in tl],
            "atomic": sorted(obj.atomic),
            "leaves": sorted(obj.leaves),
            "used": list(obj.downstream),
            "used_counts": list(obj.downstream.values()),
            "unreachable": sorted(obj.unreachable),
            "dead_merges": list(obj.dead_merges),
        },
    )


def _vocabulary_structure(tok: LoadedTokenizer) -> VocabStructure:
    stt = stt_result(tok)
    ok = stt.mask  # ok[id] == 1 when tokenize(t) == [t]
    unreachable = _strict_unreachable(tok, stt.pieces)
    vocab = tok.vocab
    n_ids = len(ok)
    okn = np.frombuffer(bytes(ok), dtype=np.uint8).astype(bool)
    ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
    lens = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))
    sel = okn[ids] & (lens > 1)
    # produced tokens (reachable, longer than one character), shortest first so parts come before them
    order = np.argsort(lens[sel], kind="stable")
    produced, produced_len = ids[sel][order], lens[sel][order]
    if tok.continuing_subword_prefix or tok.end_of_word_suffix:
        rows = _final_merges_by_replay(tok, produced.tolist())
        t_arr, a_arr, b_arr, r_arr = (np.array(x, dtype=np.int64) for x in rows)
    else:
        t_arr, a_arr, b_arr, r_arr = _splits_by_levels(tok, okn, ids, lens, produced, produced_len)
    tl = t_arr.tolist()
    split = dict(zip(tl, zip(a_arr.tolist(), b_arr.tolist())))
    final_rank = dict(zip(tl, r_arr.tolist()))
    produced_set = set(tl)
    atomic = set(vocab.values()) - unreachable - produced_set
    parts = np.bincount(np.concatenate([a_arr, b_arr]), minlength=n_ids)  # l == r counts twice
    used = np.flatnonzero(parts)
    downstream: dict[int, int] = dict(zip(used.tolist(), parts[used].tolist()))
    leaves = (unreachable | produced_set) - set(downstream)
    # depth = longest path to the alphabet: relax all splits at once until nothing changes (<= depth rounds)
    depth_np = np.zeros(n_ids, dtype=np.int64)
    for _ in range(len(tl) + 1):
        new = 1 + np.maximum(depth_np[a_arr], depth_np[b_arr])
        if np.array_equal(new, depth_np[t_arr]):
            break
        depth_np[t_arr] = new
    depth: dict[int, int] = dict.fromkeys(atomic, 0)
    depth.update(zip(tl, depth_np[t_arr].tolist()))
    fired = np.zeros(len(tok.merges), dtype=bool)
    fired[r_arr] = True
    return VocabStructure(
        split=split,
        atomic=atomic,
        leaves=leaves,
        downstream=downstream,
        unreachable=unreachable,
        depth=depth,
        final_rank=final_rank,
        dead_merges=np.flatnonzero(~fired).tolist(),
    )


def _final_merges_by_replay(
    tok: LoadedTokenizer, tids: list[int], replay: BPEReplay | None = None
) -> tuple[list[int], ...]:
    """(tokens, lefts, rights, ranks): the last merge of the step-wise replay of each token's own string
    (tokens whose replay merges nothing are left out)."""
    replay = replay or get_replay(tok, ignore_merges=False)
    id_to_str = tok.id_to_token
    out: tuple[list[int], ...] = ([], [], [], [])
    for t in tids:
        events = replay._run(id_to_str[t])[2]
        if events:
            a, b, _res, r, _pos = events[-1]
            for col, v in zip(out, (t, a, b, r)):
                col.append(v)
    return out


def _splits_by_levels(
    tok: LoadedTokenizer, okn: Any, ids: Any, lens: Any, produced: Any, produced_len: Any
) -> tuple[Any, Any, Any, Any]:
    """(tokens, lefts, rights, ranks) as arrays, without replaying: a produced token's split is its only
    candidate merge whose parts are reachable; where several remain, the one across whose split point no
    merge can fire before it (the straddle test on the parts' merge-tree spines, `_straddles`; exact when
    the parts' merge ranks grow along their trees, otherwise the step-wise replay decides). Tokens are
    handled one string length at a time, so each level's parts are final and everything runs as array code."""
    n_ids = len(okn)
    stride = pair_stride(tok)
    left, right, result, keep = merge_arrays(tok)
    kept = np.flatnonzero(keep)
    pair_keys = left[kept] * stride + right[kept]
    by_key = np.argsort(pair_keys)
    lookup = (pair_keys[by_key], kept[by_key])  # sorted pair keys and their ranks
    fallback: BPEReplay | None = None  # for the few tokens the arrays cannot decide
    len_of = np.zeros(n_ids, dtype=np.int64)
    len_of[ids] = lens
    # candidate merges: result produced, parts reachable; sorted by (result length, result, rank)
    safe = [np.where(keep, x, 0) for x in (left, right, result)]
    cand = np.flatnonzero(keep & okn[safe[0]] & okn[safe[1]] & okn[safe[2]])
    cand = cand[np.lexsort((cand, result[cand], len_of[result[cand]]))]
    c_res, c_left, c_right = result[cand], left[cand], right[cand]
    top = int(lens.max(initial=0)) + 2
    c_bounds = np.searchsorted(len_of[c_res], np.arange(top))
    p_bounds = np.searchsorted(produced_len, np.arange(top))
    has_cand = np.zeros(n_ids, dtype=bool)
    has_cand[c_res] = True

    tree = _Trees(n_ids)
    out: list[tuple[Any, Any, Any, Any]] = []
    for length in range(2, top - 1):
        lo, hi = int(c_bounds[length]), int(c_bounds[length + 1])
        undecided = np.zeros(0, dtype=np.int64)  # this level's tokens whose split the replay decides
        pos = np.zeros(0, dtype=np.int64)  # chosen candidates (positions in `cand`)
        if hi > lo:
            res_l, a_l, b_l = c_res[lo:hi], c_left[lo:hi], c_right[lo:hi]
            starts = np.flatnonzero(np.r_[True, res_l[1:] != res_l[:-1]])
            counts = np.diff(np.r_[starts, hi - lo])
            group = np.repeat(np.arange(len(starts)), counts)
            single = counts[group] == 1
            # several candidates: test the usable ones (both parts built in rank order) all at once
            test = np.flatnonzero(~single & tree.mono[a_l] & tree.mono[b_l])
            ok_rows = test[~tree.straddles(a_l[test], b_l[test], lookup, stride)]
            # where several pass (not expected), prefer the split whose parts are finished earliest
            key = np.maximum(tree.fr[a_l[ok_rows]], tree.fr[b_l[ok_rows]])
            ok_rows = ok_rows[np.lexsort((ok_rows, key, group[ok_rows]))]
            _g, first = np.unique(group[ok_rows], return_index=True)
            picked = ok_rows[first]
            decided = np.zeros(len(starts), dtype=bool)
            decided[group[picked]] = True
            pos = np.sort(np.concatenate([np.flatnonzero(single), picked])) + lo
            undecided = res_l[starts[~decided & (counts > 1)]]
        # tokens with no candidate, or whose usable candidates all straddle: step-wise replay
        lvl = produced[p_bounds[length] : p_bounds[length + 1]]
        rest = np.concatenate([undecided, lvl[~has_cand[lvl]]]).tolist()
        t_arr, a_arr, b_arr, r_arr = c_res[pos], c_left[pos], c_right[pos], cand[pos]
        if rest:
            if fallback is None:
                fallback = BPEReplay(tok, ignore_merges=False, pairs=(SortedPairs(*lookup), stride))
            more = [np.array(x, dtype=np.int64) for x in _final_merges_by_replay(tok, rest, fallback)]
            t_arr, a_arr, b_arr, r_arr = (
                np.concatenate([x, y]) for x, y in zip((t_arr, a_arr, b_arr, r_arr), more)
            )
        if len(t_arr):
            tree.add(t_arr, a_arr, b_arr, r_arr)
            out.append((t_arr, a_arr, b_arr, r_arr))
    if not out:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(4))  # type: ignore[return-value]
    return tuple(np.concatenate(col) for col in zip(*out))  # type: ignore[return-value]


class _Trees:
    """Merge trees under construction as arrays: split parts, formation rank and monotonicity per id."""

    def __init__(self, n_ids: int) -> None:
        self.left = np.full(n_ids, -1, dtype=np.int64)
        self.right = np.full(n_ids, -1, dtype=np.int64)
        self.fr = np.full(n_ids, -1, dtype=np.int64)  # rank of the merge that makes the token (-1: none)
        self.mono = np.ones(n_ids, dtype=bool)  # its own run pops merges in increasing rank order

    def add(self, t: Any, a: Any, b: Any, r: Any) -> None:
        """Record splits t = a + b by merge rank r (parts already recorded)."""
        fr = self.fr
        self.mono[t] = self.mono[a] & self.mono[b] & (r > fr[a]) & (r > fr[b])
        fr[t] = r
        self.left[t] = a
        self.right[t] = b

    def spine(self, t: Any, side: Any) -> list[Any]:
        """Nodes down the right (side = self.right) or left edge of each token's tree, -1 past the end."""
        nodes = [t]
        cur = t
        while True:
            cur = np.where(cur >= 0, side[np.maximum(cur, 0)], -1)
            if not (cur >= 0).any():
                return nodes
            nodes.append(cur)

    def straddles(self, a: Any, b: Any, lookup: tuple[Any, Any], stride: int) -> Any:
        """For candidate splits (a | b): does some merge join symbols across the split before both parts
        are built? Both parts' own runs pop merges in increasing rank order (callers ensure it), so until
        something joins across the split point each side evolves like its isolated run, in rank order. A
        pair (A, B) from the left part's right spine and the right part's left spine is adjacent while both
        exist; its merge fires if its rank comes before A or B is consumed (a rank below the current one
        fires at once). Ties: the inner merge consuming A starts left of A and wins; the one consuming B
        starts at B and loses."""
        out = np.zeros(len(a), dtype=bool)
        if not len(a):
            return out
        keys, ranks = lookup
        fr = self.fr
        lefts = self.spine(a, self.right)
        rights = self.spine(b, self.left)
        inf = np.iinfo(np.int64).max
        for i, A in enumerate(lefts):
            pa = fr[np.maximum(lefts[i - 1], 0)] if i else np.full(len(a), inf)  # when A is consumed
            for j, B in enumerate(rights):
                if i == 0 and j == 0:
                    continue  # the candidate merge itself
                rows = np.flatnonzero((A >= 0) & (B >= 0) & ~out)
                if not len(rows):
                    continue
                k = A[rows] * stride + B[rows]
                at = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
                hit = keys[at] == k
                rows, r = rows[hit], ranks[at[hit]]
                pb = fr[np.maximum(rights[j - 1][rows], 0)] if j else np.full(len(rows), inf)
                pa_r = pa[rows]
                low = np.maximum(fr[A[rows]], fr[B[rows]])
                out[rows[(low < pa_r) & (low < pb) & (r < pa_r) & (r <= pb)]] = True
        return out


def _strict_unreachable(tok: LoadedTokenizer, failed: Iterable[int]) -> set[int]:
    """STT-unreachable model ids (from the ids STT does not return whole), minus added tokens,
    byte-fallback pieces and the unk token."""
    added = set(tok.added_ids)
    added_contents = {a.content for a in tok.added_tokens}
    id_to_str = tok.id_to_token
    out = set()
    for tid in failed:
        if tid in added:
            continue
        s = id_to_str[tid]
        if s in added_contents or s == tok.unk_token or tok.is_byte_piece(s):
            continue
        out.add(tid)
    return out
