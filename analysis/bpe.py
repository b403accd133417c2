"""Step-wise BPE replay that reproduces the Hugging Face `tokenizers` BPE model exactly, plus the
vocabulary structure (merge trees, atomics, leaves, downstream counts, dead merges).

methods.md §5 and §1. The replay mirrors `tokenizers`' `BPE::merge_word` / `Word::merge_all`:

* a word starts as one symbol per character (`continuing_subword_prefix` on every non-first character,
  `end_of_word_suffix` on the last one); a character missing from the vocabulary becomes `<0xNN>` byte
  pieces (byte_fallback) or the unk token (fused with a neighbouring unk when `fuse_unk`), or is dropped;
* a min-heap of (rank, position, result) pops the lowest-ranked adjacent pair, leftmost first; stale
  entries are skipped when the pair at that position no longer maps to the same result;
* with `ignore_merges`, a word that is itself in the vocabulary is returned whole, with no merges.

The full pipeline (:meth:`BPEReplay.tokenize`) splits added tokens like `tokenizers`' AddedVocabulary
(non-normalized ones on the raw text, normalized ones on each normalized piece, with lstrip / rstrip /
single_word), and uses the Rust normalizer and pre-tokenizer on each piece.
"""

from __future__ import annotations

import heapq
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import add, itemgetter
from typing import Any

import numpy as np
import tokenizers

from .cache import DiskCache, memoize
from .errors import UnsupportedTokenizerError
from .tokenizer import LoadedTokenizer

_WORD_CACHE_LIMIT = 250_000


@dataclass(frozen=True)
class MergeEvent:
    """One applied merge: `left` + `right` → `result`, with its merge rank and the symbol position.

    `position` is the index (in the word's initial symbol list) of the first symbol of `left`.
    """

    left: str
    right: str
    result: str
    rank: int
    position: int


def require_bpe(tok: LoadedTokenizer, what: str = "this analysis") -> None:
    """Raise a clear UnsupportedTokenizerError unless `tok` has a BPE model."""
    if tok.model_type != "BPE":
        raise UnsupportedTokenizerError(
            f"{what} needs a BPE tokenizer; {tok.name} has a {tok.model_type} model"
        )


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class BPEReplay:
    """A pure-Python, step-wise re-implementation of one tokenizer's BPE model (dropout always off)."""

    def __init__(
        self, tok: LoadedTokenizer, *, ignore_merges: bool | None = None, pairs: tuple[Any, int] | None = None
    ) -> None:
        """`pairs`: (pair lookup with `.get(left * stride + right) -> rank`, stride); default `pair_ranks`."""
        require_bpe(tok, "BPE replay")
        self.tok = tok
        self.ignore_merges = tok.ignore_merges if ignore_merges is None else bool(ignore_merges)
        model = tok.model
        self.vocab: dict[str, int] = tok.vocab
        self.id_to_str: dict[int, str] = {i: s for s, i in self.vocab.items()}
        self.prefix: str = tok.continuing_subword_prefix or ""
        self.suffix: str = tok.end_of_word_suffix or ""
        self.byte_fallback = bool(model.get("byte_fallback", False))
        self.fuse_unk = bool(model.get("fuse_unk", False))
        self.unk_token: str | None = model.get("unk_token")
        self.unk_id: int | None = self.vocab.get(self.unk_token) if self.unk_token is not None else None
        self._byte_ids: list[int | None] = [self.vocab.get(f"<0x{b:02X}>") for b in range(256)]
        # left * stride + right -> rank (a repeated pair keeps its LAST rank, like the Rust map); result by rank
        self._pair_rank, self._stride = pairs if pairs is not None else pair_ranks(tok)
        self._result_of: list[int] = _merge_arrays(tok)[2].tolist()
        # word -> (initial ids, final ids, events as (left id, right id, result id, rank, position))
        self._cache: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...]]] = {}
        self._lock = threading.Lock()
        self._pipeline_ready = False

    # ------------------------------------------------------------------ model level
    def initial_ids(self, word: str) -> list[int]:
        """The word's initial symbols (ids) before any merge, exactly as `BPE::merge_word` builds them."""
        vocab = self.vocab
        out: list[int] = []
        unk: int | None = None  # pending (possibly fused) unk symbol
        n = len(word)
        prefix, suffix = self.prefix, self.suffix
        for i, ch in enumerate(word):
            s = ch
            if i and prefix:
                s = prefix + s
            if i == n - 1 and suffix:
                s = s + suffix
            tid = vocab.get(s)
            if tid is not None:
                if unk is not None:
                    out.append(unk)
                    unk = None
                out.append(tid)
                continue
            if self.byte_fallback:
                pieces = [self._byte_ids[b] for b in s.encode("utf-8")]
                if all(p is not None for p in pieces):
                    out.extend(pieces)  # type: ignore[arg-type]  (a pending unk is NOT flushed: Rust does the same)
                    continue
            if self.unk_token is not None:
                if self.unk_id is None:
                    raise UnsupportedTokenizerError(
                        f"{self.tok.name}: unk token {self.unk_token!r} is not in the vocabulary"
                    )
                if unk is not None and not self.fuse_unk:
                    out.append(unk)
                unk = self.unk_id
            # no byte fallback and no unk: the character is silently dropped (Rust behaviour)
        if unk is not None:
            out.append(unk)
        return out

    def merge_of(self, left: int, right: int) -> tuple[int, int] | None:
        """(rank, result id) of the merge the model applies to this adjacent pair, or None."""
        r = self._pair_rank.get(left * self._stride + right)
        return None if r is None else (r, self._result_of[r])

    def _run(self, word: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...]]:
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        if self.ignore_merges and word in self.vocab:
            res: tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...]] = (
                (self.vocab[word],),
                (self.vocab[word],),
                (),
            )
            return res
        init = self.initial_ids(word)
        ids = list(init)
        n = len(ids)
        events: list[tuple[int, ...]] = []
        if n > 1:
            get = self._pair_rank.get
            stride = self._stride
            result_of = self._result_of
            nxt = list(range(1, n + 1))
            nxt[-1] = -1
            prv = list(range(-1, n - 1))
            dead = [False] * n
            heap = []
            for p in range(n - 1):
                m = get(ids[p] * stride + ids[p + 1])
                if m is not None:
                    heap.append((m, p, result_of[m]))
            heapq.heapify(heap)
            pop, push = heapq.heappop, heapq.heappush
            while heap:
                _rank, p, nid = pop(heap)
                if dead[p]:
                    continue
                q = nxt[p]
                if q == -1:
                    continue
                left, right = ids[p], ids[q]
                m = get(left * stride + right)
                if m is None or result_of[m] != nid:
                    continue  # stale entry
                ids[p] = nid
                dead[q] = True
                r = nxt[q]
                nxt[p] = r
                if r != -1:
                    prv[r] = p
                events.append((left, right, nid, m, p))
                pp = prv[p]
                if pp != -1:
                    m2 = get(ids[pp] * stride + nid)
                    if m2 is not None:
                        push(heap, (m2, pp, result_of[m2]))
                if r != -1:
                    m2 = get(nid * stride + ids[r])
                    if m2 is not None:
                        push(heap, (m2, p, result_of[m2]))
            final = tuple(ids[i] for i in range(n) if not dead[i])
        else:
            final = tuple(ids)
        res = (tuple(init), final, tuple(events))
        if len(self._cache) >= _WORD_CACHE_LIMIT:
            self._cache.clear()
        self._cache[word] = res
        return res

    def tokenize_word_ids(self, word: str) -> list[int]:
        """Model-level tokenization of one pre-token (already normalized and byte-mapped), as ids."""
        if not word:
            return []
        return list(self._run(word)[1])

    def tokenize_word(self, word: str) -> tuple[list[str], list[MergeEvent]]:
        """Model-level tokenization of one pre-token plus the merge events, like `model.tokenize`."""
        if not word:
            return [], []
        _init, final, events = self._run(word)
        s = self.id_to_str
        return [s[i] for i in final], [MergeEvent(s[a], s[b], s[c], rk, pos) for a, b, c, rk, pos in events]

    def word_trees(self, word: str) -> list[dict]:
        """One merge tree per output token of a pre-token: nested {token, id, rank, children}."""
        if not word:
            return []
        s = self.id_to_str
        if self.ignore_merges and word in self.vocab:
            return [_node(s, self.vocab[word], None, [], skipped=len(word) > 1)]
        init, final, events = self._run(word)
        nodes = [_node(s, i, None, []) for i in init]
        nxt = list(range(1, len(init) + 1))
        if nxt:
            nxt[-1] = -1
        alive = [True] * len(init)
        for _a, _b, c, rk, pos in events:
            q = nxt[pos]
            nodes[pos] = _node(s, c, rk, [nodes[pos], nodes[q]])
            alive[q] = False
            nxt[pos] = nxt[q]
        return [nodes[i] for i in range(len(init)) if alive[i]]

    def word_spans(self, word: str) -> list[tuple[int, int, MergeEvent]]:
        """(left start, right start) initial-symbol indices of every merge event of a pre-token."""
        init, _final, events = self._run(word)
        nxt = list(range(1, len(init) + 1))
        if nxt:
            nxt[-1] = -1
        s = self.id_to_str
        out = []
        for a, b, c, rk, pos in events:
            q = nxt[pos]
            out.append((pos, q, MergeEvent(s[a], s[b], s[c], rk, pos)))
            nxt[pos] = nxt[q]
        return out

    # ------------------------------------------------------------------ full pipeline
    def _prepare_pipeline(self) -> None:
        with self._lock:
            if self._pipeline_ready:
                return
            rust = self.tok.tokenizer
            self._normalizer = rust.normalizer
            self._pretok = rust.pre_tokenizer
            self._pretok_rest = self._pretok
            pre = self.tok.pre_tokenizer
            if pre is not None and _has_first_metaspace(pre):
                # Metaspace(prepend_scheme="first") only prepends on the piece at original offset 0
                alt = _metaspace_never(json.loads(json.dumps(pre)))
                tiny = {
                    "version": "1.0",
                    "model": {"type": "BPE", "vocab": {}, "merges": []},
                    "pre_tokenizer": alt,
                }
                self._pretok_rest = tokenizers.Tokenizer.from_str(json.dumps(tiny)).pre_tokenizer
            raw_added = []
            norm_added = []
            for a in self.tok.added_tokens:
                if not a.content:
                    continue
                if a.normalized and self._normalizer is not None:
                    content = self._normalizer.normalize_str(a.content)
                    if content:
                        norm_added.append((content, a))
                elif a.normalized:
                    norm_added.append((a.content, a))
                else:
                    raw_added.append((a.content, a))
            self._raw_added = _AddedMatcher(raw_added)
            self._norm_added = _AddedMatcher(norm_added)
            self._pipeline_ready = True

    def pieces(self, text: str) -> list[tuple[str, bool, int]]:
        """Split text like the Rust pipeline: (pre-token string or added-token content, is_added, original offset)."""
        self._prepare_pipeline()
        out: list[tuple[str, bool, int]] = []
        for seg, is_added, start in self._raw_added.split(text):
            if is_added:
                out.append((seg, True, start))
                continue
            normed = self._normalizer.normalize_str(seg) if self._normalizer is not None else seg
            for sub, sub_added, nstart in self._norm_added.split(normed):
                if sub_added:
                    out.append((sub, True, start))
                    continue
                first = start == 0 and nstart == 0
                pre = self._pretok if first else self._pretok_rest
                if pre is None:
                    out.append((sub, False, start))
                else:
                    for w, _off in pre.pre_tokenize_str(sub):
                        out.append((w, False, start))
        return out

    def tokenize(self, text: str) -> list[str]:
        """Full pipeline (added-token split, normalizer, pre-tokenizer, model), no special tokens added."""
        s = self.id_to_str
        out: list[str] = []
        for piece, is_added, _ in self.pieces(text):
            if is_added:
                out.append(piece)
            elif piece:
                out.extend(s[i] for i in self._run(piece)[1])
        return out

    def tokenize_ids(self, text: str) -> list[int]:
        """Full pipeline, as ids (added tokens resolved through the Rust tokenizer's id map)."""
        out: list[int] = []
        rust = self.tok.tokenizer
        for piece, is_added, _ in self.pieces(text):
            if is_added:
                out.append(rust.token_to_id(piece))
            elif piece:
                out.extend(self._run(piece)[1])
        return out

    def text_trees(self, text: str) -> list[dict]:
        """A merge tree for every token of a text (added tokens appear as childless special nodes)."""
        s = self.id_to_str
        out: list[dict] = []
        for piece, is_added, _ in self.pieces(text):
            if is_added:
                tid = self.tok.tokenizer.token_to_id(piece)
                node = {"token": piece, "id": tid, "rank": None, "children": [], "added": True}
                out.append(node)
            elif piece:
                out.extend(self.word_trees(piece))
        del s
        return out


def _node(s: dict[int, str], tid: int, rank: int | None, children: list[dict], skipped: bool = False) -> dict:
    n = {"token": s[tid], "id": tid, "rank": rank, "children": children}
    if skipped:
        n["merge_skipped"] = True
    return n


def _has_first_metaspace(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
        return True
    return any(_has_first_metaspace(c) for c in node.get("pretokenizers") or [])


def _metaspace_never(node: dict) -> dict:
    if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
        node["prepend_scheme"] = "never"
    for c in node.get("pretokenizers") or []:
        _metaspace_never(c)
    return node


class _AddedMatcher:
    """Leftmost-longest matching of added-token contents with lstrip / rstrip / single_word, like Rust."""

    def __init__(self, entries: list[tuple[str, Any]]) -> None:
        self.by_content: dict[str, Any] = {}
        for content, a in entries:
            self.by_content.setdefault(content, a)
        if self.by_content:
            alts = sorted(self.by_content, key=len, reverse=True)
            self.rx: re.Pattern | None = re.compile("|".join(re.escape(c) for c in alts))
        else:
            self.rx = None

    def split(self, text: str) -> list[tuple[str, bool, int]]:
        """(segment, is_added_token, start offset) covering text; whitespace taken by lstrip/rstrip is dropped."""
        if self.rx is None or not text:
            return [(text, False, 0)] if text else []
        out: list[tuple[str, bool, int]] = []
        start_offset = 0
        for m in self.rx.finditer(text):
            start, stop = m.start(), m.end()
            a = self.by_content[m.group(0)]
            if a.single_word:
                start_ok = start == 0 or not _is_word_char(text[start - 1])
                stop_ok = stop == len(text) or not _is_word_char(text[stop])
                if not (start_ok and stop_ok):
                    continue
            if a.lstrip:
                ns = start
                while ns > 0 and text[ns - 1].isspace():
                    ns -= 1
                start = max(ns, start_offset)
            if a.rstrip:
                while stop < len(text) and text[stop].isspace():
                    stop += 1
            if start > start_offset:
                out.append((text[start_offset:start], False, start_offset))
            out.append((m.group(0), True, start))
            start_offset = stop
        if start_offset < len(text):
            out.append((text[start_offset:], False, start_offset))
        return out


# ---------------------------------------------------------------------- shared replay objects
def get_replay(tok: LoadedTokenizer, *, ignore_merges: bool | None = None) -> BPEReplay:
    """A process-wide shared BPEReplay for (tokenizer content, ignore_merges) (a few kept, LRU)."""
    flag = tok.ignore_merges if ignore_merges is None else bool(ignore_merges)
    return _replay(tok, flag)


@memoize(maxsize=6)
def _replay(tok: LoadedTokenizer, ignore_merges: bool) -> BPEReplay:
    return BPEReplay(tok, ignore_merges=ignore_merges)


# ---------------------------------------------------------------------- vocabulary structure
@dataclass
class VocabStructure:
    """How the vocabulary is built: merge splits, alphabet, leaves, downstream counts, dead merges."""

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


def merge_id_lists(tok: LoadedTokenizer) -> tuple[list[int | None], list[int | None], list[int | None]]:
    """Per merge rank: (left ids, right ids, result ids); None where a string is missing from the vocabulary."""
    get = tok.vocab.get
    plen = len(tok.continuing_subword_prefix or "")
    merges = tok.merges
    # C-level passes (map/zip) instead of a Python loop: ~4x faster on 280k merges
    lefts = list(map(itemgetter(0), merges))
    rights = list(map(itemgetter(1), merges))
    joined = map(add, lefts, rights) if not plen else (a + b[plen:] for a, b in merges)
    return list(map(get, lefts)), list(map(get, rights)), list(map(get, joined))


@memoize(maxsize=4)
def pair_ranks(tok: LoadedTokenizer) -> tuple[dict[int, int], int]:
    """(left id * stride + right id -> merge rank, stride): the Rust BPE merge map (a repeated pair keeps its
    last rank; merges naming unknown strings are skipped) with one int key per pair, cheap to build and probe.
    The result of rank r is `_merge_arrays(tok)[2][r]`."""
    stride = _stride(tok)
    left, right, _result, keep = _merge_arrays(tok)
    kept = keep.nonzero()[0]
    return dict(zip((left[kept] * stride + right[kept]).tolist(), kept.tolist())), stride


def _stride(tok: LoadedTokenizer) -> int:
    """Pair keys are left * stride + right: one more than the largest model-vocabulary id."""
    return max(tok.vocab.values(), default=-1) + 1


class _SortedPairs:
    """A read-only pair -> rank lookup over sorted key arrays (no dict to build; ~1 us per probe)."""

    def __init__(self, keys: Any, ranks: Any) -> None:
        self.keys, self.ranks = keys, ranks

    def get(self, key: int) -> int | None:
        """The rank of the merge with this pair key, or None."""
        at = int(np.searchsorted(self.keys, key))
        if at < len(self.keys) and self.keys[at] == key:
            return int(self.ranks[at])
        return None


def vocabulary_structure(tok: LoadedTokenizer, *, disk_cache: bool = True) -> VocabStructure:
    """Merge split, depth, final rank, atomics, leaves, downstream counts and dead merges (methods.md §5).

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


@memoize(maxsize=4)
def _merge_arrays(tok: LoadedTokenizer) -> tuple[Any, Any, Any, Any]:
    """Merge ranks as numpy arrays (left, right, result, keep): keep marks merges the Rust map uses (all
    ids present; for a repeated pair only its last rank)."""
    stride = _stride(tok)
    li, ri, ni = merge_id_lists(tok)
    if None in li or None in ri or None in ni:
        li, ri, ni = ([-1 if x is None else x for x in col] for col in (li, ri, ni))
    left = np.array(li, dtype=np.int64)
    right = np.array(ri, dtype=np.int64)
    res = np.array(ni, dtype=np.int64)
    keep = (left >= 0) & (right >= 0) & (res >= 0)
    idx = np.flatnonzero(keep)
    key = left[idx] * stride + right[idx]
    _u, first_from_end = np.unique(key[::-1], return_index=True)
    if len(_u) < len(idx):  # a repeated pair: the Rust map keeps its last rank
        last = idx[len(idx) - 1 - first_from_end]
        keep[:] = False
        keep[last] = True
    for arr in (left, right, res, keep):
        arr.flags.writeable = False  # shared through the cache
    return left, right, res, keep


def _vocabulary_structure(tok: LoadedTokenizer) -> VocabStructure:
    from .reachability import stt_result

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
    stride = _stride(tok)
    left, right, result, keep = _merge_arrays(tok)
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
                fallback = BPEReplay(tok, ignore_merges=False, pairs=(_SortedPairs(*lookup), stride))
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


# ---------------------------------------------------------------------- merge trees
def merge_tree(tok: LoadedTokenizer, token: str) -> dict:
    """How BPE (merges only, ignore_merges off) builds `token` from its own string.

    Returns a nested {"token", "id", "rank", "children": [...]} tree. For a reachable token the root is
    the token itself (`"reachable": True`). For an unreachable one the root is the token with
    `"reachable": False`, `rank` None and as children the trees of the pieces BPE actually builds.
    Added tokens outside the model vocabulary come back as a childless node with `"added": True`.
    """
    require_bpe(tok, "merge trees")
    rust = tok.tokenizer
    tid = tok.vocab.get(token)
    if tid is None:
        aid = rust.token_to_id(token)
        if aid is not None:
            return {"token": token, "id": aid, "rank": None, "children": [], "added": True, "reachable": True}
    rep = get_replay(tok, ignore_merges=False)
    trees = rep.word_trees(token)
    if tid is not None and len(trees) == 1 and trees[0]["id"] == tid:
        root = dict(trees[0])
        root["reachable"] = True
        return root
    return {"token": token, "id": tid, "rank": None, "children": trees, "reachable": False}


def merge_candidates_for(tok: LoadedTokenizer, token: str) -> list[tuple[int, str, str]]:
    """[(rank, left, right)] of the merges (as the model resolves them) whose result is `token`."""
    rep = get_replay(tok, ignore_merges=False)
    tid = rep.vocab.get(token)
    if tid is None:
        return []
    out = []
    for k in range(1, len(token)):
        a, b = token[:k], rep.prefix + token[k:]
        ai, bi = rep.vocab.get(a), rep.vocab.get(b)
        if ai is None or bi is None:
            continue
        m = rep.merge_of(ai, bi)
        if m is not None and m[1] == tid:
            out.append((m[0], a, b))
    return sorted(out)


def tree_depth(node: dict) -> int:
    """Number of merge levels in a tree (a leaf has depth 0)."""
    kids = node.get("children") or []
    return 0 if not kids else 1 + max(tree_depth(k) for k in kids)


def iter_tree(node: dict, depth: int = 0) -> Iterable[tuple[dict, int]]:
    """Pre-order walk yielding (node, depth)."""
    yield node, depth
    for k in node.get("children") or []:
        yield from iter_tree(k, depth + 1)


def collapse_tree(node: dict, max_depth: int, _d: int = 0) -> dict:
    """A copy of a tree cut at `max_depth` levels: deeper subtrees collapse into their root (`collapsed`)."""
    kids = node.get("children") or []
    out = {k: v for k, v in node.items() if k != "children"}
    if kids and _d >= max_depth:
        out["children"] = []
        out["collapsed"] = True
        return out
    out["children"] = [collapse_tree(k, max_depth, _d + 1) for k in kids]
    return out


def layout_forest(trees: list[dict]) -> list[dict]:
    """Tidy layout of several trees side by side: one record per node with x, y (root at y=0, leaves
    below), parent index and the node's fields. Leaves get consecutive x; a parent sits between its children."""
    out: list[dict] = []
    next_x = [0.0]

    def walk(node: dict, depth: int, parent: int | None, tree_no: int) -> int:
        idx = len(out)
        rec = {k: v for k, v in node.items() if k != "children"}
        rec.update({"depth": depth, "parent": parent, "tree": tree_no})
        out.append(rec)
        kids = node.get("children") or []
        if not kids:
            rec["x"] = next_x[0]
            next_x[0] += 1.0
        else:
            xs = [out[walk(k, depth + 1, idx, tree_no)]["x"] for k in kids]
            rec["x"] = (xs[0] + xs[-1]) / 2
        rec["y"] = -depth
        return idx

    for i, t in enumerate(trees):
        walk(t, 0, None, i)
        next_x[0] += 0.6  # a gap between trees
    return out
