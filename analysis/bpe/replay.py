"""Step-wise BPE replay that reproduces the Hugging Face `tokenizers` BPE model exactly.

The replay mirrors `tokenizers`' `BPE::merge_word` / `Word::merge_all`:

* a word starts as one symbol per character (`continuing_subword_prefix` on every non-first character,
  `end_of_word_suffix` on the last one); a character missing from the vocabulary becomes `<0xNN>` byte
  pieces (byte_fallback) or the unk token (fused with a neighbouring unk when `fuse_unk`), or is dropped;
* a min-heap of (rank, position, result) pops the lowest-ranked adjacent pair, leftmost first; stale
  entries are skipped when the pair at that position no longer maps to the same result;
* with `ignore_merges`, a word that is itself in the vocabulary is returned whole, with no merges.

The full pipeline (:meth:`BPEReplay.tokenize`) splits added tokens like `tokenizers`' AddedVocabulary
(non-normalized ones on the raw text, normalized ones on each normalized piece, with lstrip / rstrip /
single_word), and uses the Rust normalizer and pre-tokenizer on each piece.

Also here: the merge list as id arrays (:func:`merge_arrays`, :func:`merge_id_lists`), the pair → rank map
(:func:`pair_ranks`) and the one "requires BPE" check (:func:`require_bpe`).
"""

from __future__ import annotations

import heapq
import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import add, itemgetter
from typing import Any, TypeVar

import numpy as np
import tokenizers

from analysis.core.cache import memoize
from analysis.errors import UnsupportedTokenizerError
from analysis.tokenizer.tokenizer import LoadedTokenizer

_WORD_CACHE_LIMIT = 250_000
T = TypeVar("T")


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


def require_bpe(tok: LoadedTokenizer, what: str = "this analysis", *, hint: str = "") -> None:
    """The one "requires BPE" check: raise UnsupportedTokenizerError unless `tok` has a BPE model.

    The message names the analysis (`what`) and the model the tokenizer has, plus an optional `hint`
    (e.g. which method to use instead).
    """
    if tok.model_type != "BPE":
        raise UnsupportedTokenizerError(
            f"{what} needs a BPE tokenizer; {tok.name} has a {tok.model_type} model"
            + (f" ({hint})" if hint else "")
        )


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def merge_ids(
    init: Sequence[int], rank_of: Callable[[int], int | None], stride: int, result_of: Sequence[int]
) -> tuple[tuple[int, ...], list[tuple[int, int, int, int, int]]]:
    """The BPE merge loop on one word's symbols, like `tokenizers`' `Word::merge_all` (dropout off).

    `init`: the initial symbol ids; `rank_of(left * stride + right)`: the rank of the merge of that adjacent
    pair (None: no merge); `result_of[rank]`: the id it makes. The lowest rank fires first, the leftmost
    occurrence at equal rank; stale queue entries are skipped. Returns (final ids, events), each event
    (left, right, result, rank, position) with `position` the initial index of the left symbol's first symbol.
    """
    ids = list(init)
    n = len(ids)
    events: list[tuple[int, int, int, int, int]] = []
    get = rank_of
    heap = []
    for p in range(n - 1):
        m = get(ids[p] * stride + ids[p + 1])
        if m is not None:
            heap.append((m, p, result_of[m]))
    if not heap:
        return tuple(ids), events
    if n == 2:  # one pair, one merge
        m, _p, nid = heap[0]
        events.append((ids[0], ids[1], nid, m, 0))
        return (nid,), events
    heapq.heapify(heap)
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    dead = [False] * n
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
    return tuple(ids[i] for i in range(n) if not dead[i]), events


def fold_merges(
    leaves: list[T], events: Iterable[tuple[int, ...]], join: Callable[[T, T, tuple], T]
) -> list[T]:
    """Fold merge events (from :func:`merge_ids`) over one value per initial symbol: each event replaces the
    values of its two symbols by `join(left, right, event)`. Returns the values of the final symbols (e.g.
    one merge tree per output token)."""
    nodes = list(leaves)
    n = len(nodes)
    nxt = list(range(1, n + 1))
    if nxt:
        nxt[-1] = -1
    alive = [True] * n
    for ev in events:
        pos = ev[4]
        q = nxt[pos]
        nodes[pos] = join(nodes[pos], nodes[q], ev)
        alive[q] = False
        nxt[pos] = nxt[q]
    return [nodes[i] for i in range(n) if alive[i]]


class MergeTable:
    """A merge list as a rank table for :func:`merge_ids`, over symbol strings.

    Used to apply merges appended to a base model without building the extended tokenizer: the base model's
    segmentation is final (appended merges rank after every base merge and never make a pair a base merge
    joins), so the appended merges alone run over it, by the replay's merge loop. A pair listed twice keeps
    its last rank, like the `tokenizers` merge map.
    """

    _STRIDE = 1 << 32

    def __init__(self, merges: Sequence[tuple[str, str]]) -> None:
        #: every string a merge names (parts and results), by table id
        self.symbols: list[str] = list(dict.fromkeys(x for a, b in merges for x in (a, b, a + b)))
        ids = {s: i for i, s in enumerate(self.symbols)}
        stride = self._STRIDE
        self._get = ids.get
        self.ranks: dict[int, int] = {ids[a] * stride + ids[b]: r for r, (a, b) in enumerate(merges)}
        self.result_of: list[int] = [ids[a + b] for a, b in merges]
        #: the merged pairs, and their left parts (a word whose symbols but the last are none of them is final)
        self.pairs: frozenset[tuple[str, str]] = frozenset(merges)
        self.lefts: set[str] = {a for a, _ in merges}

    def __len__(self) -> int:
        return len(self.result_of)

    def run(self, symbols: Sequence[str]) -> tuple[tuple[int, ...], list[tuple[int, int, int, int, int]]]:
        """(final ids, merge events) of one word given as symbol strings. Ids: :attr:`symbols` indices; a symbol
        that no merge names gets the negative id ``-2 - position`` (its pairs have no rank, and it stays as
        it is)."""
        get = self._get
        ids = [get(s, -2 - i) for i, s in enumerate(symbols)]
        return merge_ids(ids, self.ranks.get, self._STRIDE, self.result_of)

    def apply(self, symbols: Sequence[str]) -> tuple[str, ...]:
        """The symbols after the merges."""
        if len(symbols) < 2 or self.pairs.isdisjoint(zip(symbols, symbols[1:])):
            return tuple(symbols)
        final, events = self.run(symbols)
        if not events:
            return tuple(symbols)
        made = self.symbols
        return tuple(made[i] if i >= 0 else symbols[-2 - i] for i in final)


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
        self._result_of: list[int] = merge_arrays(tok)[2].tolist()
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
        final, events = merge_ids(init, self._pair_rank.get, self._stride, self._result_of)
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
        init, _final, events = self._run(word)
        return fold_merges(
            [_node(s, i, None, []) for i in init], events, lambda a, b, ev: _node(s, ev[2], ev[3], [a, b])
        )

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
    The result of rank r is `merge_arrays(tok)[2][r]`."""
    stride = pair_stride(tok)
    left, right, _result, keep = merge_arrays(tok)
    kept = keep.nonzero()[0]
    return dict(zip((left[kept] * stride + right[kept]).tolist(), kept.tolist())), stride


def pair_stride(tok: LoadedTokenizer) -> int:
    """Pair keys are left * stride + right: one more than the largest model-vocabulary id."""
    return max(tok.vocab.values(), default=-1) + 1


class SortedPairs:
    """A read-only pair -> rank lookup over sorted key arrays (no dict to build; ~1 us per probe)."""

    def __init__(self, keys: Any, ranks: Any) -> None:
        self.keys, self.ranks = keys, ranks

    def get(self, key: int) -> int | None:
        """The rank of the merge with this pair key, or None."""
        at = int(np.searchsorted(self.keys, key))
        if at < len(self.keys) and self.keys[at] == key:
            return int(self.ranks[at])
        return None


@memoize(maxsize=4)
def merge_arrays(tok: LoadedTokenizer) -> tuple[Any, Any, Any, Any]:
    """Merge ranks as numpy arrays (left, right, result, keep): keep marks merges the Rust map uses (all
    ids present; for a repeated pair only its last rank)."""
    stride = pair_stride(tok)
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
