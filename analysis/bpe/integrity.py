"""Tokenizer integrity: does every id decode to bytes that encode back to that id alone?

The check security teams run before deploying a tokenizer (a token that no text produces is an embedding row
that training never updates; one whose text encodes to other ids cannot be asked for). Every id of the
vocabulary (model and added tokens) is taken to its bytes (:meth:`LoadedTokenizer.token_bytes`), those bytes are
encoded with the whole pipeline (normalizer, pre-tokenizer, model; no special tokens added), and the id passes
when the encoding is exactly that id. Every other id is listed with the first reason that explains it:

* ``special`` — a special or added token (matched before the model runs; text does not reach it by merges);
* ``unk`` — the unknown token;
* ``byte piece`` — bytes that are not text on their own (a `<0xNN>` byte-fallback piece, or a byte-level token
  holding part of a UTF-8 character);
* ``unreachable`` — the merges never produce it from its own string (the Self-Tokenization Test of
  :mod:`analysis.bpe.stt`, reused as it is, its stored report included; BPE models only);
* ``continuation`` — a word-internal piece (WordPiece `##…`, or a SentencePiece piece without ▁ where the
  pipeline puts ▁ before the first word): no text starts with it;
* ``normalised away`` — the normalizer changes the token's text (case, Unicode form, stripped characters);
* ``pre-tokenizer splits it`` — the pre-tokenizer cuts its text into several pieces;
* ``other`` — the text encodes to other ids for another reason (e.g. a longer match of an added token).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from analysis.core.cache import memoize
from analysis.core.progress import Progress, report
from analysis.tokenizer.alphabets import SPIECE_UNDERLINE
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .stt import stt_report

#: The reasons, in the order they are tried.
REASONS = ("special", "unk", "byte piece", "unreachable", "continuation", "normalised away",
           "pre-tokenizer splits it", "other")  # fmt: skip
#: Ids listed per reason in the JSON document (the counts are complete).
LISTED_PER_REASON = 200
_BATCH = 8192
#: the progress callback of the integrity call running in this thread (kept out of the memo's key)
_LOCAL = threading.local()


@dataclass(frozen=True)
class IntegrityRow:
    """One id that does not come back alone: its token, readable text, the reason and what the text encodes to."""

    id: int
    token: str
    readable: str
    reason: str
    encoded_as: list[int]

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"id": self.id, "token": self.token, "readable": self.readable, "reason": self.reason,
                "encoded_as": self.encoded_as}  # fmt: skip


@dataclass(frozen=True)
class IntegrityReport:
    """Every id checked: how many come back alone, and each other id with its reason."""

    tokenizer: str
    ids: int
    round_trip: int
    rows: list[IntegrityRow]
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """Ids per reason (every reason, 0 included)."""
        c = Counter(r.reason for r in self.rows)
        return {k: c.get(k, 0) for k in REASONS}

    def to_json(self) -> dict[str, Any]:
        """The document `python -m analysis integrity --json` prints: counts, and up to
        :data:`LISTED_PER_REASON` ids per reason."""
        listed: dict[str, list[dict[str, Any]]] = {k: [] for k in REASONS}
        for r in self.rows:
            if len(listed[r.reason]) < LISTED_PER_REASON:
                listed[r.reason].append(r.to_json())
        return {"tokenizer": self.tokenizer, "ids": self.ids, "round_trip": self.round_trip,
                "not_round_trip": len(self.rows), "counts": self.counts, "listed": listed,
                "seconds": round(self.seconds, 3), "notes": self.notes}  # fmt: skip


def _adds_word_start(tok: LoadedTokenizer) -> bool:
    """Whether the pipeline puts ▁ before the first word (SentencePiece style), seen from what it does to "a"."""
    if not tok.is_sentencepiece_style:
        return False
    first = tok.tokenizer.encode("a", add_special_tokens=False).tokens
    return bool(first) and first[0].startswith(SPIECE_UNDERLINE)


def integrity(tok: LoadedTokenizer, *, progress: Progress | None = None) -> IntegrityReport:
    """Check every id of `tok` (see the module docstring); remembered per tokenizer in this process (only the
    first call reports `progress`)."""
    _LOCAL.progress = progress
    try:
        return _integrity(tok)
    finally:
        _LOCAL.progress = None


@memoize(maxsize=4)
def _integrity(tok: LoadedTokenizer) -> IntegrityReport:
    progress = getattr(_LOCAL, "progress", None)
    t0 = time.perf_counter()
    id_to_token = tok.id_to_token
    added = {a.id for a in tok.added_tokens}
    notes: list[str] = []
    unreachable: set[int] = set()
    if tok.model_type == "BPE":
        stt = stt_report(tok)
        unreachable = {r.id for r in stt.unreachable}
    else:
        notes.append(
            f"a {tok.model_type} model: no Self-Tokenization Test (BPE only); 'unreachable' is not used"
        )
    word_start = _adds_word_start(tok)
    unk = tok.unk_token
    prefix = tok.continuing_subword_prefix if tok.model_type == "WordPiece" else None
    enc = tok.tokenizer
    normalizer, pre = enc.normalizer, enc.pre_tokenizer
    rows: list[IntegrityRow] = []
    todo: list[tuple[int, str, str]] = []  # (id, token, text to encode)
    ids = sorted(id_to_token)
    for tid in ids:
        s = id_to_token[tid]
        reason = None
        if tid in added:
            reason = "special"
        elif unk is not None and s == unk:
            reason = "unk"
        if reason is None:
            try:
                text = tok.token_bytes(s).decode("utf-8")
            except UnicodeDecodeError:
                text, reason = "", "byte piece"
        if reason is None and tok.is_byte_piece(s):
            reason = "byte piece"
        if reason is None and tid in unreachable:
            reason = "unreachable"
        if reason is None and prefix and s.startswith(prefix) and len(s) > len(prefix):
            reason = "continuation"
        if reason is None and word_start:
            if s.startswith(SPIECE_UNDERLINE):
                text = text[1:]  # the pipeline puts the ▁ back
            else:
                reason = "continuation"
        if reason is None:
            todo.append((tid, s, text))
        else:
            rows.append(IntegrityRow(tid, s, tok.readable(s), reason, []))
    passed = 0
    for start in range(0, len(todo), _BATCH):
        report(progress, start, len(todo), "encoding every token's text")
        chunk = todo[start : start + _BATCH]
        got = enc.encode_batch_fast([t for _, _, t in chunk], add_special_tokens=False)
        for (tid, s, text), e in zip(chunk, got):
            if e.ids == [tid]:
                passed += 1
                continue
            if normalizer is not None and normalizer.normalize_str(text) != text:
                reason = "normalised away"
            elif pre is not None and len(pre.pre_tokenize_str(text)) > 1:
                reason = "pre-tokenizer splits it"
            else:
                reason = "other"
            rows.append(IntegrityRow(tid, s, tok.readable(s), reason, list(e.ids)))
    report(progress, len(todo), len(todo), "done")
    rows.sort(key=lambda r: r.id)
    return IntegrityReport(tok.name, len(ids), passed, rows, time.perf_counter() - t0, notes)
