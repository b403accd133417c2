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
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from operator import add, itemgetter
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
        self.merge_map = merge_map(tok)
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
        """Produced tokens whose final merge uses `tid` as a component (index built on first use)."""
        if not self.built_on and self.split:
            idx: dict[int, list[int]] = {}
            for t, (a, b) in self.split.items():
                idx.setdefault(a, []).append(t)
                if b != a:
                    idx.setdefault(b, []).append(t)
            self.built_on = idx
        return self.built_on.get(tid, [])


_STRUCT_CACHE: OrderedDict[str, VocabStructure] = OrderedDict()


def merge_map(tok: LoadedTokenizer) -> dict[tuple[int, int], tuple[int, int]]:
    """(left id, right id) -> (rank, result id), like the Rust BPE map (a repeated pair keeps its last rank)."""
    hit = _MAP_CACHE.get(tok.content_hash)
    if hit is not None:
        return hit
    vocab = tok.vocab
    get = vocab.get
    plen = len(tok.continuing_subword_prefix or "")
    merges = tok.merges
    # C-level passes (map/zip) instead of a Python loop: ~4x faster on 280k merges
    lefts = list(map(itemgetter(0), merges))
    rights = list(map(itemgetter(1), merges))
    joined = map(add, lefts, rights) if not plen else (a + b[plen:] for a, b in merges)
    li = list(map(get, lefts))
    ri = list(map(get, rights))
    ni = list(map(get, joined))
    mm: dict[tuple[int, int], tuple[int, int]]
    if None not in li and None not in ri and None not in ni:
        mm = dict(zip(zip(li, ri), zip(range(len(merges)), ni)))
    else:  # the Rust library refuses such files; be lenient and skip the broken merges
        mm = {}
        for rank, (a, b, n) in enumerate(zip(li, ri, ni)):
            if a is not None and b is not None and n is not None:
                mm[(a, b)] = (rank, n)
    _MAP_CACHE[tok.content_hash] = mm
    while len(_MAP_CACHE) > 4:
        _MAP_CACHE.popitem(last=False)
    return mm


_MAP_CACHE: OrderedDict[str, dict[tuple[int, int], tuple[int, int]]] = OrderedDict()


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
    hit = _STRUCT_CACHE.get(tok.content_hash)
    if hit is None and disk_cache:
        hit = _disk_load(f"vstruct-{tok.content_hash}.json")
    if hit is not None:
        _STRUCT_CACHE[tok.content_hash] = hit
        return hit
    res = _vocabulary_structure(tok)
    _STRUCT_CACHE[tok.content_hash] = res
    while len(_STRUCT_CACHE) > 4:
        _STRUCT_CACHE.popitem(last=False)
    if disk_cache:
        _disk_save(f"vstruct-{tok.content_hash}.json", res)
    return res


def _disk_load(name: str) -> VocabStructure | None:
    """A vocabulary structure from the on-disk JSON cache (None when absent or unreadable); never unpickles."""
    try:
        from .defaults import cache_dir

        path = cache_dir() / name
        if not path.is_file():
            return None
        d = json.loads(path.read_text(encoding="utf-8"))

        def ints(key: str) -> dict[int, int]:
            return {int(k): int(v) for k, v in d[key].items()}

        return VocabStructure(
            split={int(k): (int(v[0]), int(v[1])) for k, v in d["split"].items()},
            atomic=set(d["atomic"]),
            leaves=set(d["leaves"]),
            downstream=ints("downstream"),
            unreachable=set(d["unreachable"]),
            depth=ints("depth"),
            final_rank=ints("final_rank"),
            dead_merges=list(d["dead_merges"]),
        )
    except Exception:
        return None


def _disk_save(name: str, obj: VocabStructure) -> None:
    """Write a vocabulary structure into the on-disk JSON cache (best effort, atomic rename)."""
    try:
        from .defaults import cache_dir

        path = cache_dir() / name
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        data = {
            "split": {str(k): list(v) for k, v in obj.split.items()},
            "atomic": sorted(obj.atomic),
            "leaves": sorted(obj.leaves),
            "downstream": {str(k): v for k, v in obj.downstream.items()},
            "unreachable": sorted(obj.unreachable),
            "depth": {str(k): v for k, v in obj.depth.items()},
            "final_rank": {str(k): v for k, v in obj.final_rank.items()},
            "dead_merges": list(obj.dead_merges),
        }
        tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        tmp.replace(path)
    except Exception:
        pass


def _vocabulary_structure(tok: LoadedTokenizer) -> VocabStructure:
    from .reachability import reachable_mask, self_tokenize_status

    ok = reachable_mask(tok)  # ok[id] == 1 when tokenize(t) == [t]
    unreachable = _strict_unreachable(tok, self_tokenize_status(tok))
    vocab = tok.vocab
    id_to_str = tok.id_to_token
    mm = merge_map(tok)
    n_ids = len(ok)
    # result id -> candidate merges (rank, left, right) whose parts are reachable
    cands: dict[int, list[tuple[int, int, int]]] = {}
    for (ai, bi), (rank, ri) in mm.items():
        if ok[ri] and ok[ai] and ok[bi]:
            lst = cands.get(ri)
            if lst is None:
                cands[ri] = [(rank, ai, bi)]
            else:
                lst.append((rank, ai, bi))
    simple = not (tok.continuing_subword_prefix or tok.end_of_word_suffix)
    produced = [t for t in vocab.values() if ok[t] and len(id_to_str[t]) > 1]
    produced.sort(key=lambda t: len(id_to_str[t]))
    split: dict[int, tuple[int, int]] = {}
    fr = [-1] * n_ids  # rank of the merge that makes each token (-1: none)
    mono = bytearray(b"\x01") * n_ids  # 1 when the token's own run pops merges in increasing rank order
    rspine: dict[int, tuple[tuple[int, int], ...]] = {}
    lspine: dict[int, tuple[tuple[int, int], ...]] = {}
    replay: BPEReplay | None = None
    mget = mm.get
    rget, lget = rspine.get, lspine.get
    for t in produced:
        cl = cands.get(t)
        chosen = None
        if cl is not None and simple:
            if len(cl) == 1:
                chosen = cl[0]
            else:
                for c in cl:
                    a = c[1]
                    b = c[2]
                    if mono[a] and mono[b]:
                        left = rget(a) or _spine(a, split, fr, rspine, 1)
                        right = lget(b) or _spine(b, split, fr, lspine, 0)
                        if _no_straddle(c, left, right, mget):
                            chosen = c
                            break
        if chosen is None:
            if replay is None:
                replay = get_replay(tok, ignore_merges=False)
            _init, _final, events = replay._run(id_to_str[t])
            if not events:
                continue
            a, b, _res, rk, _pos = events[-1]
            chosen = (rk, a, b)
        r, a, b = chosen
        split[t] = (a, b)
        fr[t] = r
        if not (mono[a] and mono[b] and r > fr[a] and r > fr[b]):
            mono[t] = 0
    final_rank = {t: fr[t] for t in split}
    produced_set = set(split)
    atomic = set(vocab.values()) - unreachable - produced_set
    downstream: dict[int, int] = dict(Counter(chain.from_iterable(split.values())))  # l == r counts twice
    leaves = (unreachable | produced_set) - set(downstream)
    depth: dict[int, int] = dict.fromkeys(atomic, 0)
    for t, (a, b) in split.items():  # insertion order = shortest first, so parts are usually done
        da = depth.get(a)
        db = depth.get(b)
        if da is None or db is None:  # parts longer than the token (only with odd prefixes): recurse
            da, db = _depth_of(a, split, depth), _depth_of(b, split, depth)
        depth[t] = 1 + (da if da > db else db)
    fired = set(final_rank.values())
    dead = [r for r in range(len(tok.merges)) if r not in fired]
    res = VocabStructure(
        split=split,
        atomic=atomic,
        leaves=leaves,
        downstream=downstream,
        unreachable=unreachable,
        depth=depth,
        final_rank=final_rank,
        dead_merges=dead,
    )
    return res


def _depth_of(t: int, split: dict[int, tuple[int, int]], depth: dict[int, int]) -> int:
    stack = [t]
    while stack:
        x = stack[-1]
        if x in depth:
            stack.pop()
            continue
        if x not in split:
            depth[x] = 0
            stack.pop()
            continue
        a, b = split[x]
        pend = [y for y in (a, b) if y not in depth]
        if pend:
            stack.extend(pend)
        else:
            depth[x] = 1 + max(depth[a], depth[b])
            stack.pop()
    return depth[t]


def _spine(t: int, split: dict, final_rank: list[int], cache: dict, side: int) -> tuple[tuple[int, int], ...]:
    """(node, formation rank) down the right (side=1) or left (side=0) edge of a token's merge tree."""
    hit = cache.get(t)
    if hit is not None:
        return hit
    sp = split.get(t)
    f = final_rank[t]
    res = ((t, f),) if sp is None else ((t, f),) + _spine(sp[side], split, final_rank, cache, side)
    cache[t] = res
    return res


_INF = 1 << 62


def _no_straddle(
    cand: tuple[int, int, int],
    left: tuple[tuple[int, int], ...],
    right: tuple[tuple[int, int], ...],
    mget: Any,
) -> bool:
    """True when no merge joins symbols across the candidate's split point before both parts are built.

    Both parts' own runs pop merges in increasing rank order (callers ensure it), so until something joins
    across the split point each side evolves like its isolated run, in rank order. A pair (A, B) from the
    left part's right spine and the right part's left spine is adjacent while both exist; its merge fires
    if its rank comes before A or B is consumed (a rank below the current one fires at once). Ties: the
    inner merge consuming A starts left of A and wins; the one consuming B starts at B and loses.
    """
    _rank, a, b = cand
    pa = _INF
    for A, fa in left:
        pb = _INF
        for B, fb in right:
            if A != a or B != b:
                m = mget((A, B))
                if m is not None:
                    r = m[0]
                    lo = fa if fa > fb else fb
                    if lo < pa and lo < pb and r < pa and r <= pb:
                        return False
            pb = fb
        pa = fa
    return True


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
