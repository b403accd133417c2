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
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import tokenizers

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

    def __init__(self, tok: LoadedTokenizer, *, ignore_merges: bool | None = None) -> None:
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
        # (left id, right id) -> (rank, result id); a repeated pair keeps its LAST rank, like the Rust map
        plen = len(self.prefix)
        vocab = self.vocab
        mm: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (a, b) in enumerate(tok.merges):
            ai = vocab.get(a)
            bi = vocab.get(b)
            ni = vocab.get(a + b[plen:])
            if ai is None or bi is None or ni is None:
                continue  # the Rust library refuses such files; be lenient here
            mm[(ai, bi)] = (rank, ni)
        self.merge_map = mm
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
            mm = self.merge_map
            get = mm.get
            nxt = list(range(1, n + 1))
            nxt[-1] = -1
            prv = list(range(-1, n - 1))
            dead = [False] * n
            heap = []
            for p in range(n - 1):
                m = get((ids[p], ids[p + 1]))
                if m is not None:
                    heap.append((m[0], p, m[1]))
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
                m = get((left, right))
                if m is None or m[1] != nid:
                    continue  # stale entry
                ids[p] = nid
                dead[q] = True
                r = nxt[q]
                nxt[p] = r
                if r != -1:
                    prv[r] = p
                events.append((left, right, nid, m[0], p))
                pp = prv[p]
                if pp != -1:
                    m2 = get((ids[pp], nid))
                    if m2 is not None:
                        push(heap, (m2[0], pp, m2[1]))
                if r != -1:
                    m2 = get((nid, ids[r]))
                    if m2 is not None:
                        push(heap, (m2[0], p, m2[1]))
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
_REPLAYS: OrderedDict[tuple[str, bool], BPEReplay] = OrderedDict()
_REPLAYS_LOCK = threading.Lock()


def get_replay(tok: LoadedTokenizer, *, ignore_merges: bool | None = None) -> BPEReplay:
    """A process-wide cached BPEReplay for (tokenizer content, ignore_merges) (a few kept, LRU)."""
    flag = tok.ignore_merges if ignore_merges is None else bool(ignore_merges)
    key = (tok.content_hash, flag)
    with _REPLAYS_LOCK:
        hit = _REPLAYS.get(key)
        if hit is not None:
            _REPLAYS.move_to_end(key)
            return hit
    rep = BPEReplay(tok, ignore_merges=flag)
    with _REPLAYS_LOCK:
        _REPLAYS[key] = rep
        while len(_REPLAYS) > 6:
            _REPLAYS.popitem(last=False)
    return rep


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
        """Produced tokens whose final merge uses `tid` as a component."""
        return self.built_on.get(tid, [])


def merge_candidates(tok: LoadedTokenizer) -> dict[str, list[tuple[int, str, str]]]:
    """result string -> [(effective rank, left, right)] of every distinct merge pair producing it."""
    plen = len(tok.continuing_subword_prefix or "")
    last_rank: dict[tuple[str, str], int] = {}
    for rank, pair in enumerate(tok.merges):
        last_rank[pair] = rank
    out: dict[str, list[tuple[int, str, str]]] = {}
    for (a, b), rank in last_rank.items():
        r = a + b[plen:]
        lst = out.get(r)
        if lst is None:
            out[r] = [(rank, a, b)]
        else:
            lst.append((rank, a, b))
    return out


_STRUCT_CACHE: OrderedDict[str, VocabStructure] = OrderedDict()


def vocabulary_structure(tok: LoadedTokenizer) -> VocabStructure:
    """Merge split, depth, final rank, atomics, leaves, downstream counts and dead merges (methods.md §5).

    Reachability comes from the Rust model (STT); a produced token's split is its unique producing merge,
    and the step-wise replay of its own string decides only where several merges produce the same string.
    """
    require_bpe(tok, "vocabulary structure")
    hit = _STRUCT_CACHE.get(tok.content_hash)
    if hit is not None:
        return hit
    from .reachability import self_tokenize_status

    status = self_tokenize_status(tok)  # id -> True when tokenize(t) == [t]
    unreachable = _strict_unreachable(tok, status)
    vocab = tok.vocab
    id_to_str = {i: s for s, i in vocab.items()}
    merges = tok.merges
    plen = len(tok.continuing_subword_prefix or "")
    last_rank: dict[tuple[str, str], int] = {}
    for rank, pair in enumerate(merges):
        last_rank[pair] = rank
    # result id -> candidate (rank, left id, right id); None marks several distinct candidates
    cand: dict[int, tuple[int, int, int] | None] = {}
    for (a, b), rank in last_rank.items():
        ri = vocab.get(a + b[plen:])
        ai = vocab.get(a)
        bi = vocab.get(b)
        if ri is None or ai is None or bi is None:
            continue
        if ri in cand:
            cand[ri] = None
        else:
            cand[ri] = (rank, ai, bi)
    replay: BPEReplay | None = None
    split: dict[int, tuple[int, int]] = {}
    final_rank: dict[int, int] = {}
    for tid, ok in status.items():
        if not ok:
            continue
        s = id_to_str[tid]
        if len(s) <= 1:
            continue
        c = cand.get(tid, False)
        if c:
            split[tid] = (c[1], c[2])
            final_rank[tid] = c[0]
            continue
        if replay is None:
            replay = get_replay(tok, ignore_merges=False)
        _init, _final, events = replay._run(s)
        if events:
            a, b, r, rk, _pos = events[-1]
            split[tid] = (a, b)
            final_rank[tid] = rk
    produced = set(split)
    all_model = set(vocab.values())
    atomic = all_model - unreachable - produced
    downstream: dict[int, int] = {}
    built_on: dict[int, list[int]] = {}
    components: set[int] = set()
    for t, (a, b) in split.items():
        downstream[a] = downstream.get(a, 0) + 1
        downstream[b] = downstream.get(b, 0) + 1
        components.add(a)
        components.add(b)
        built_on.setdefault(a, []).append(t)
        if b != a:
            built_on.setdefault(b, []).append(t)
    leaves = (unreachable | produced) - components
    # depth: atomic 0, produced 1 + max(depth of parts); iterative memo (ranks need not be monotone)
    depth: dict[int, int] = {t: 0 for t in atomic}
    for t in split:
        if t in depth:
            continue
        stack = [t]
        while stack:
            x = stack[-1]
            if x in depth:
                stack.pop()
                continue
            a, b = split.get(x, (None, None))
            if a is None:
                depth[x] = 0
                stack.pop()
                continue
            pend = [y for y in (a, b) if y not in depth]
            if pend:
                stack.extend(pend)
            else:
                depth[x] = 1 + max(depth[a], depth[b])
                stack.pop()
    fired = set(final_rank.values())
    dead = [r for r in range(len(merges)) if r not in fired]
    res = VocabStructure(
        split=split,
        atomic=atomic,
        leaves=leaves,
        downstream=downstream,
        unreachable=unreachable,
        depth=depth,
        final_rank=final_rank,
        dead_merges=dead,
        built_on=built_on,
    )
    _STRUCT_CACHE[tok.content_hash] = res
    while len(_STRUCT_CACHE) > 4:
        _STRUCT_CACHE.popitem(last=False)
    return res


def _strict_unreachable(tok: LoadedTokenizer, status: dict[int, bool]) -> set[int]:
    """STT-unreachable model ids, minus added tokens, byte-fallback pieces and the unk token."""
    added = set(tok.added_ids)
    added_contents = {a.content for a in tok.added_tokens}
    id_to_str = tok.id_to_token
    out = set()
    for tid, ok in status.items():
        if ok or tid in added:
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
        m = rep.merge_map.get((ai, bi))
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
