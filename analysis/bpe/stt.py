"""Self-Tokenization Test (STT): which vocabulary tokens the merges can never produce, and why.

Purason, Chizhov, Yamshchikov & Fishel, *Teaching Old Tokenizers New Words: Efficient Tokenizer Adaptation
for Pre-trained Models* (arXiv 2512.03989, 2025), §3.3: run the *model only* (no normalizer, pre-tokenizer or
added-token split) on every vocabulary string, with `ignore_merges` off and no dropout; a token is reachable iff the
model returns exactly that one token.

Speed: the bulk runs through the Rust `model.tokenize`. When the tokenizer's own model already has
`ignore_merges` off it is used as is (read-only). When it has `ignore_merges` on, each vocabulary string
gets a sentinel character appended that is not in the vocabulary (and, with no unk / byte fallback,
is dropped by the model): the word is then never a vocabulary hit, the merges run, and the sentinel adds
no symbol, so the result equals `tokenize` with `ignore_merges` off — no private model copy is needed.
Other cases (dropout, unk, byte fallback, end-of-word suffix together with ignore_merges) use a private
model copy with the flags forced off.

Stored: the categorised report of a tokenizer (with the STT result under it) is kept in the disk store keyed by
the tokenizer's content hash and :data:`STT_STORE_VERSION`, so a second session, another process or a restarted
server never runs the test again for the same vocabulary; a long first run reports progress.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import tokenizers

from analysis.core.cache import DiskCache, memoize
from analysis.core.memory import no_cyclic_gc
from analysis.core.progress import Progress, report, scaled
from analysis.core.unicode import text_script
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .replay import BPEReplay, get_replay, require_bpe
from .trees import merge_candidates_for, merge_tree

CATEGORIES = (
    "reachable",
    "unreachable_multi",
    "unreachable_other_single",
    "merge_skip_only",
    "byte_fallback",
    "special",
    "unk",
)
CATEGORY_HELP = {
    "reachable": "the bare model returns exactly this token for its own string",
    "unreachable_multi": "the merges split the token's own string into several tokens: it can never be produced",
    "unreachable_other_single": "the merges turn the token's string into one different token",
    "merge_skip_only": "unreachable by merges, produced only when a whole pre-token equals it (ignore_merges)",
    "byte_fallback": "a <0xNN> byte piece, reached by byte fallback by design",
    "special": "a special or added token (matched before the model runs)",
    "unk": "the unknown token",
}
#: how the "requires BPE" check names this analysis
_STT = "the Self-Tokenization Test"
_SENTINELS = ("\U0010fffd", "\U000f0000", "\uffff", "\ufdd0", "\U000e01ef")
#: format of the stored report (bump when the test, the categories or `readable`/`text_script` change)
STT_STORE_VERSION = 1
_STORE = DiskCache("stt-report", STT_STORE_VERSION)
#: the progress callback of the stt_report call running in this thread (kept out of the memo's key)
_LOCAL = threading.local()
_CHUNK = 16384


@memoize(maxsize=3)
def _private_model(tok: LoadedTokenizer) -> Any:
    """A private Rust BPE model with ignore_merges off and no dropout (built once per tokenizer)."""
    md = dict(tok.model)
    md["ignore_merges"] = False
    md["dropout"] = None
    text = json.dumps({"version": "1.0", "model": md}, ensure_ascii=False)
    return tokenizers.Tokenizer.from_str(text).model


def _stt_callable(tok: LoadedTokenizer) -> tuple[Callable[[str], list], str, Any]:
    """(tokenize, sentinel, shared model or None): tokenize(s + sentinel) == STT tokenization of s."""
    require_bpe(tok, _STT)
    model = tok.tokenizer.model
    if not tok.dropout:
        if not tok.ignore_merges:
            return model.tokenize, "", model
        plain = not tok.end_of_word_suffix and tok.unk_token is None and not tok.byte_fallback
        if plain:
            prefix = tok.continuing_subword_prefix or ""
            vocab = tok.vocab
            for ch in _SENTINELS:
                if ch not in vocab and prefix + ch not in vocab:
                    return model.tokenize, ch, model
    return _private_model(tok).tokenize, "", None


def stt_tokenize_fn(tok: LoadedTokenizer) -> Callable[[str], list]:
    """A function str -> Rust tokens, equal to `model.tokenize` with ignore_merges off and no dropout."""
    tokenize, sentinel, _shared = _stt_callable(tok)
    if not sentinel:
        return tokenize
    return lambda s: tokenize(s + sentinel) if s else []


def bare_tokenize_fn(tok: LoadedTokenizer) -> Callable[[str], list]:
    """The model alone on one string (no normalizer, pre-tokenizer or added tokens): BPE with merge skipping
    and dropout off (`stt_tokenize_fn`); other models (WordPiece, Unigram) as they are."""
    if tok.model_type == "BPE":
        return stt_tokenize_fn(tok)
    return tok.tokenizer.model.tokenize


@dataclass(frozen=True)
class STTResult:
    """Compact STT outcome: `mask[id] == 1` when the bare model returns exactly [id] for the token's own
    string; `pieces[id]` holds what it returns instead, for every other model-vocabulary id."""

    mask: bytearray
    pieces: dict[int, list[int]]

    def tokenization(self, tid: int) -> list[int] | None:
        """What the bare model returns for token `tid`'s own string (None for ids outside the model)."""
        if tid < len(self.mask) and self.mask[tid]:
            return [tid]
        return self.pieces.get(tid)


def stt_result(tok: LoadedTokenizer) -> STTResult:
    """Run the STT over the model vocabulary once (cached per tokenizer): the reachability mask and the
    tokenizations of the tokens that are not reachable."""
    require_bpe(tok, _STT)
    return _stt_result(tok)


@memoize(maxsize=4)
def _stt_result(tok: LoadedTokenizer) -> STTResult:
    return _run_stt(tok)


def _run_stt(tok: LoadedTokenizer) -> STTResult:
    """The test itself: one bare-model call per vocabulary string."""
    tokenize, sentinel, shared = _stt_callable(tok)
    vocab = tok.vocab
    mask = bytearray(max(tok.id_to_token, default=-1) + 1)
    other: dict[int, list[int]] = {}
    progress = getattr(_LOCAL, "progress", None)
    items = list(vocab.items())
    for start in range(0, len(items), _CHUNK):
        report(progress, start, len(items), "self-tokenizing the vocabulary")
        # hot loop: one Rust call per token; reachable tokens only set a byte (no list, no dict entry)
        for s, i in items[start : start + _CHUNK]:
            r = tokenize(s + sentinel)
            if len(r) == 1 and r[0].id == i:
                mask[i] = 1
            else:
                other[i] = [t.id for t in r]
    if shared is not None and hasattr(shared, "_clear_cache"):
        # the Rust word cache stops inserting when full: do not leave it full of vocabulary strings
        shared._clear_cache()
    return STTResult(mask, other)


def self_tokenize(tok: LoadedTokenizer) -> dict[int, list[int]]:
    """For every model-vocabulary id, the ids the bare model (ignore_merges off, no dropout) returns."""
    res = stt_result(tok)
    mask, other = res.mask, res.pieces
    return {i: [i] if mask[i] else other[i] for i in tok.vocab.values()}


def self_tokenize_status(tok: LoadedTokenizer) -> dict[int, bool]:
    """id -> True when the bare model returns exactly [id] for the token's own string."""
    mask = stt_result(tok).mask
    return {i: bool(mask[i]) for i in tok.vocab.values()}


def reachable_mask(tok: LoadedTokenizer) -> bytearray:
    """mask[id] == 1 when the bare model returns exactly [id] for the token's own string (0 otherwise,
    including ids outside the model vocabulary)."""
    return stt_result(tok).mask


def unreachable_ids(tok: LoadedTokenizer, *, ignore_added: bool = True) -> set[int]:
    """Ids of model-vocabulary tokens that STT cannot reach (added tokens excluded by default)."""
    bad = set(stt_result(tok).pieces)
    if ignore_added:
        bad -= set(tok.added_ids)
        added_contents = {a.content for a in tok.added_tokens}
        bad = {i for i in bad if tok.id_to_token.get(i) not in added_contents}
    # byte-fallback pieces are reached by byte fallback, the unk token by design: not failures
    bad = {
        i for i in bad if not tok.is_byte_piece(tok.id_to_token[i]) and tok.id_to_token[i] != tok.unk_token
    }
    return bad


# --------------------------------------------------------------------------- the categorised report
@dataclass
class STTRow:
    """One vocabulary entry of the STT table."""

    id: int
    token: str
    readable: str
    category: str
    pieces: list[int]
    script: str


@dataclass
class STTReport:
    """STT result: one row per id (model vocabulary plus added tokens) and the counts per category."""

    tokenizer: str
    ignore_merges: bool
    rows: list[STTRow]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def unreachable(self) -> list[STTRow]:
        """Rows that no merge sequence produces (multi, other single, merge-skip only)."""
        return [
            r
            for r in self.rows
            if r.category in ("unreachable_multi", "unreachable_other_single", "merge_skip_only")
        ]

    def summary(self) -> dict[str, Any]:
        """Counts (incl. the total `unreachable` = STT) plus the unreachable token list."""
        c = dict(self.counts)
        out: dict[str, Any] = {"tokenizer": self.tokenizer, "ignore_merges": self.ignore_merges}
        out["vocab_size"] = len(self.rows)
        out["reachable"] = c.get("reachable", 0)
        out["unreachable"] = (
            c.get("unreachable_multi", 0) + c.get("unreachable_other_single", 0) + c.get("merge_skip_only", 0)
        )
        for k in CATEGORIES[1:]:
            out[k] = c.get(k, 0)
        out["unreachable_tokens"] = [
            {"id": r.id, "token": r.token, "readable": r.readable} for r in self.unreachable
        ]
        return out

    def to_records(self, id_to_token: dict[int, str] | None = None) -> list[dict[str, Any]]:
        """Rows as plain dicts (pieces as a space-separated token string when id_to_token is given)."""
        out = []
        for r in self.rows:
            d = {
                "id": r.id,
                "token": r.token,
                "readable": r.readable,
                "category": r.category,
                "script": r.script,
                "n_pieces": len(r.pieces),
            }
            d["pieces"] = (
                " ".join(id_to_token.get(p, "?") for p in r.pieces)
                if id_to_token
                else " ".join(map(str, r.pieces))
            )
            out.append(d)
        return out

    def to_csv(self, id_to_token: dict[int, str] | None = None) -> str:
        """The per-token table as CSV text."""
        buf = io.StringIO()
        recs = self.to_records(id_to_token)
        w = csv.DictWriter(
            buf, fieldnames=["id", "token", "readable", "category", "script", "n_pieces", "pieces"]
        )
        w.writeheader()
        w.writerows(recs)
        return buf.getvalue()


def stt_report(tok: LoadedTokenizer, progress: Progress | None = None) -> STTReport:
    """Run STT and put every id (model vocabulary and added tokens) in exactly one category.

    Cached in memory and in the disk store (by content hash): only the first call for a vocabulary computes,
    reporting `progress` (tokens tested, then rows categorised) as it goes.
    """
    require_bpe(tok, _STT)
    _LOCAL.progress = progress
    try:
        return _stt_report(tok, tok.name)
    finally:
        _LOCAL.progress = None


@memoize(maxsize=4)
def _stt_report(tok: LoadedTokenizer, name: str) -> STTReport:
    with no_cyclic_gc():  # a row per id, no cycles: in a server's large heap the collector's passes cost more
        stored = _load_report(tok, name)
        if stored is not None:
            return stored
        progress = getattr(_LOCAL, "progress", None)
        _LOCAL.progress = scaled(progress, 0.0, 0.5)  # the test itself: the first half of the bar
        try:
            res = stt_result(tok)
        finally:
            _LOCAL.progress = progress
        rep = _categorise(tok, name, res, scaled(progress, 0.5, 1.0))
    _STORE.put(tok.content_hash, _report_doc(res, rep))
    return rep


def _categorise(tok: LoadedTokenizer, name: str, res: STTResult, progress: Progress | None) -> STTReport:
    """The report's rows: one category, readable form and script per id."""
    added_ids = set(tok.added_ids)
    added_contents = {a.content for a in tok.added_tokens}
    id_to_token = tok.id_to_token
    unk = tok.unk_token
    skip = tok.ignore_merges
    rows: list[STTRow] = []
    counts: Counter[str] = Counter()
    ids = sorted(id_to_token)
    for k, tid in enumerate(ids):
        if not k % _CHUNK:
            report(progress, k, len(ids), "categorising the tokens")
        s = id_to_token[tid]
        pieces = res.tokenization(tid) or []
        if tid in added_ids or s in added_contents:
            cat = "special"
        elif unk is not None and s == unk:
            cat = "unk"
        elif tok.is_byte_piece(s):
            cat = "byte_fallback"
        elif pieces == [tid]:
            cat = "reachable"
        elif skip:
            cat = "merge_skip_only"
        elif len(pieces) == 1:
            cat = "unreachable_other_single"
        else:
            cat = "unreachable_multi"
        counts[cat] += 1
        if cat == "reachable":
            rows.append(STTRow(tid, s, "", cat, pieces, ""))
        else:
            readable = tok.readable(s)
            rows.append(STTRow(tid, s, readable, cat, pieces, text_script(readable)))
    # readable/script for reachable rows lazily filled here (kept separate to keep the hot loop lean)
    for r in rows:
        if r.category == "reachable":
            r.readable = tok.readable(r.token)
            r.script = text_script(r.readable)
    return STTReport(
        tokenizer=name, ignore_merges=skip, rows=rows, counts={k: counts.get(k, 0) for k in CATEGORIES}
    )


def _report_doc(res: STTResult, rep: STTReport) -> dict[str, Any]:
    """The stored form of a report and its STT result: columns, the mask as base64."""
    return {
        "mask": base64.b64encode(bytes(res.mask)).decode("ascii"),
        "pieces": [[i, p] for i, p in res.pieces.items()],
        "ids": [r.id for r in rep.rows],
        "category": [CATEGORIES.index(r.category) for r in rep.rows],
        "readable": [r.readable for r in rep.rows],
        "script": [r.script for r in rep.rows],
    }


def _load_report(tok: LoadedTokenizer, name: str) -> STTReport | None:
    """The stored report of this vocabulary (also remembered as its STT result), or None (missing, foreign or
    malformed: then it is computed again)."""
    doc, id_to_token = _STORE.get(tok.content_hash), tok.id_to_token
    if not isinstance(doc, dict):
        return None
    try:
        mask = bytearray(base64.b64decode(doc["mask"], validate=True))
        res = STTResult(mask, {int(i): [int(x) for x in p] for i, p in doc["pieces"]})
        ids, cats, readable, script = doc["ids"], doc["category"], doc["readable"], doc["script"]
        if not len(ids) == len(cats) == len(readable) == len(script) == len(id_to_token):
            return None
        if len(mask) != max(id_to_token, default=-1) + 1:
            return None
        other, names = res.pieces, CATEGORIES
        # what `res.tokenization(tid) or []` gives, inlined: this runs once per id of a 150k vocabulary
        rows = [
            STTRow(tid, id_to_token[tid], rd, names[c], [tid] if mask[tid] else other.get(tid, []), sc)
            for tid, c, rd, sc in zip(ids, cats, readable, script)
        ]
    except (KeyError, TypeError, ValueError, IndexError, binascii.Error):
        return None
    counts = Counter(r.category for r in rows)
    _stt_result.cache_put((tok,), res)  # type: ignore[attr-defined]
    return STTReport(name, tok.ignore_merges, rows, {k: counts.get(k, 0) for k in CATEGORIES})


def stt_counts(tok: LoadedTokenizer) -> dict[str, int]:
    """Category counts only (no per-token readable forms): the fast path for the CLI/bench."""
    res = stt_result(tok)
    added_ids = set(tok.added_ids)
    added_contents = {a.content for a in tok.added_tokens}
    unk = tok.unk_token
    counts: Counter[str] = Counter()
    for tid, s in tok.id_to_token.items():
        pieces = res.tokenization(tid)
        if tid in added_ids or s in added_contents:
            counts["special"] += 1
        elif unk is not None and s == unk:
            counts["unk"] += 1
        elif tok.is_byte_piece(s):
            counts["byte_fallback"] += 1
        elif pieces == [tid]:
            counts["reachable"] += 1
        elif tok.ignore_merges:
            counts["merge_skip_only"] += 1
        elif pieces is not None and len(pieces) == 1:
            counts["unreachable_other_single"] += 1
        else:
            counts["unreachable_multi"] += 1
    out = {k: counts.get(k, 0) for k in CATEGORIES}
    out["unreachable"] = out["unreachable_multi"] + out["unreachable_other_single"] + out["merge_skip_only"]
    return out


# --------------------------------------------------------------------------- why a token is unreachable
def explain_unreachable(tok: LoadedTokenizer, token: str | int) -> dict[str, Any]:
    """Why a token cannot be produced: the tree BPE builds vs the merges that would make it and the
    earlier merge that wins (the first merge that joins symbols across the candidate's split point)."""
    require_bpe(tok, _STT)
    if isinstance(token, int):
        token = tok.id_to_token[token]
    tid = tok.vocab.get(token)
    rep = get_replay(tok, ignore_merges=False)
    actual = merge_tree(tok, token)
    tokens, _events = rep.tokenize_word(token)
    reachable = stt_result(tok).mask
    init = rep._run(token)[0]
    # initial symbol index where each character starts (byte fallback can give a char several symbols)
    char_start: list[int] = []
    sym = 0
    for ci, _ch in enumerate(token):
        char_start.append(sym)
        sym += _symbols_for_char(rep, token, ci)
    char_start.append(len(init))
    spans = rep.word_spans(token)
    cands = []
    for rank, a, b in merge_candidates_for(tok, token):
        k = len(a)
        boundary = char_start[k] if k < len(char_start) else len(init)
        blocker = None
        for p, q, ev in spans:
            if p < boundary <= q:
                if q == boundary:
                    blocker = ev
                break
        ai, bi = tok.vocab.get(a), tok.vocab.get(b)
        cands.append(
            {
                "left": a,
                "right": b,
                "rank": rank,
                "left_reachable": bool(ai is not None and reachable[ai]),
                "right_reachable": bool(bi is not None and reachable[bi]),
                "blocked_by": None
                if blocker is None
                else {
                    "left": blocker.left,
                    "right": blocker.right,
                    "result": blocker.result,
                    "rank": blocker.rank,
                },
            }
        )
    cands.sort(key=lambda c: c["rank"])
    if tid is not None and tokens == [token]:
        reason = "reachable: the merges rebuild this token from its own string"
    elif not cands:
        reason = "no merge produces this string: it can only come from ignore_merges or not at all"
    else:
        best = cands[0]
        parts = []
        if not best["left_reachable"]:
            parts.append(f"its left part {tok.readable(best['left'])!r} is itself unreachable")
        if not best["right_reachable"]:
            parts.append(f"its right part {tok.readable(best['right'])!r} is itself unreachable")
        if best["blocked_by"]:
            bb = best["blocked_by"]
            parts.append(
                f"merge #{bb['rank']} {tok.readable(bb['left'])!r} + {tok.readable(bb['right'])!r} fires first "
                f"and joins symbols across the split point"
            )
        reason = (
            f"merge #{best['rank']} {tok.readable(best['left'])!r} + {tok.readable(best['right'])!r} would make it, but "
            + ("; ".join(parts) if parts else "it never becomes applicable")
        )
    return {
        "token": token,
        "id": tid,
        "readable": tok.readable(token),
        "actual_tokens": tokens,
        "actual_tree": actual,
        "candidates": cands,
        "reason": reason,
    }


def _symbols_for_char(rep: BPEReplay, word: str, ci: int) -> int:
    """How many initial symbols the character at index ci becomes (1, or its byte count with byte fallback)."""
    s = word[ci]
    if ci and rep.prefix:
        s = rep.prefix + s
    if ci == len(word) - 1 and rep.suffix:
        s = s + rep.suffix
    if s in rep.vocab:
        return 1
    if rep.byte_fallback and all(rep._byte_ids[b] is not None for b in s.encode("utf-8")):
        return len(s.encode("utf-8"))
    return 1 if rep.unk_token is not None else 0


# --------------------------------------------------------------------------- never produced in practice
def corpus_token_counts(tok: LoadedTokenizer, lines: Iterable[str], batch_size: int = 2000) -> Counter[int]:
    """How often each id occurs when the real tokenizer (its own flags) encodes the lines (no specials)."""
    counts: Counter[int] = Counter()
    batch: list[str] = []
    enc = tok.tokenizer.encode_batch
    for line in lines:
        batch.append(line)
        if len(batch) >= batch_size:
            for e in enc(batch, add_special_tokens=False):
                counts.update(e.ids)
            batch = []
    if batch:
        for e in enc(batch, add_special_tokens=False):
            counts.update(e.ids)
    return counts


def never_produced(tok: LoadedTokenizer, lines: Iterable[str]) -> list[int]:
    """Model-vocabulary ids (added tokens excluded) that never occur when encoding the lines."""
    return never_produced_from_counts(tok, corpus_token_counts(tok, lines))


def never_produced_from_counts(tok: LoadedTokenizer, counts: Mapping[int, int]) -> list[int]:
    """Model-vocabulary ids (added tokens excluded) with no occurrence in `counts` (id → occurrences, as
    :func:`corpus_token_counts` or the `produced-ids` corpus statistic count them), sorted."""
    added = set(tok.added_ids)
    return sorted(i for i in tok.vocab.values() if i not in added and counts.get(i, 0) == 0)


@dataclass
class NeverProduced:
    """Vocabulary tokens a corpus never produces when the tokenizer (with its own flags) encodes it.

    `ids` are model-vocabulary ids (added tokens excluded); `lines` the text units encoded, `tokens` the tokens
    they gave; `corpus` says how the corpus was read and counted (executor, shards, bytes, seconds).
    """

    ids: list[int]
    lines: int
    tokens: int
    vocab: int
    corpus: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_counts(
        cls, tok: LoadedTokenizer, counts: Mapping[int, int], lines: int, corpus: dict | None = None
    ) -> NeverProduced:
        """From id counts (:func:`corpus_token_counts` or the `produced-ids` statistic)."""
        ids = never_produced_from_counts(tok, counts)
        vocab = len(set(tok.vocab.values()) - set(tok.added_ids))
        return cls(ids, int(lines), int(sum(counts.values())), vocab, dict(corpus or {}))

    def to_json(self) -> dict[str, Any]:
        """`corpus_lines`, `corpus_tokens`, `never_produced` (count), `never_produced_ids` and `corpus`."""
        return {
            "corpus_lines": self.lines,
            "corpus_tokens": self.tokens,
            "never_produced": len(self.ids),
            "never_produced_ids": list(self.ids),
            "corpus": self.corpus,
        }


@dataclass
class STTRun:
    """One Self-Tokenization Test as `python -m analysis stt` and the Token health page report it: the per-id
    report, optional explanations of unreachable tokens and, given a corpus, the tokens it never produces.
    :meth:`to_json` is the one schema both print and download."""

    report: STTReport
    explanations: list[dict[str, Any]] = field(default_factory=list)
    never: NeverProduced | None = None

    def to_json(self) -> dict[str, Any]:
        """The report's summary (counts per category, the unreachable tokens) plus explanations and the
        never-produced check when present."""
        out = self.report.summary()
        if self.explanations:
            out["explanations"] = self.explanations
        if self.never is not None:
            out.update(self.never.to_json())
        return out
