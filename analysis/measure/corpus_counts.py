"""What a text is counted into before any metric is taken: the per-id facts of a tokenizer (:class:`TokenFacts`),
the token ids of the lines (:func:`encode_ids`, no special tokens, dropout off), the per-line bytes, characters and
whitespace words (:func:`text_counts`), the words the tokenizer's own word-start marks delimit
(:func:`continued_words`) and the additive totals of a chunk of lines (:func:`chunk_totals`, keys :data:`TOTALS`).

Every total is a sum over sentences, so the totals of any partition of a corpus (files, shards, the map tasks of a
corpus job) add up to those of the whole; :func:`analysis.measure.metrics.stats_from_counts` turns them into the
metrics."""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.core.cache import memoize
from analysis.errors import DataError
from analysis.measure import fast_encode
from analysis.tokenizer.tokenizer import LoadedTokenizer


class TokenFacts:
    """Per-id facts of one tokenizer, filled lazily for the ids actually seen (vectorises per-token metrics).

    Arrays are indexed by token id: `word_start` (the token begins a new word: leading whitespace/▁, or a
    WordPiece piece without `##`), `space_only` (only whitespace; its successor starts a word), `byte_piece`
    (a byte-fallback token: `<0xNN>` in SentencePiece vocabularies, a single non-ASCII byte in byte-level
    ones), `partial` (not whole UTF-8 characters on its own), `length` (characters of the readable form).
    """

    def __init__(self, tok: LoadedTokenizer) -> None:
        self._tok = tok
        self._rust = tok.tokenizer
        self.size = int(tok.vocab_size)
        self._alloc(self.size)
        self._added = tok.added_ids
        self._wordpiece = tok.model_type == "WordPiece"
        self._prefix = tok.continuing_subword_prefix or "##"
        self._byte_level = tok.is_byte_level
        self._lock = threading.Lock()
        unk = tok.unk_token
        if tok.model_type == "Unigram":
            uid = tok.model.get("unk_id")
            self.unk_id = -1 if uid is None else int(uid)
        else:
            uid = self._rust.token_to_id(unk) if unk else None
            self.unk_id = -1 if uid is None else int(uid)

    def _alloc(self, n: int) -> None:
        old = getattr(self, "known", None)
        arrays = {
            "known": bool,
            "word_start": bool,
            "space_only": bool,
            "punct": bool,
            "byte_piece": bool,
            "partial": bool,
            "length": np.int32,
        }
        for name, dt in arrays.items():
            a = np.zeros(n, dtype=dt)
            if old is not None:
                prev = getattr(self, name)
                a[: prev.size] = prev
            setattr(self, name, a)
        self.size = n

    def ensure(self, ids: np.ndarray) -> None:
        """Compute the facts of every id in `ids` not seen before."""
        if ids.size == 0:
            return
        with self._lock:
            top = int(ids.max()) + 1
            if top > self.size:
                self._alloc(top)
            todo = ids[~self.known[ids]]
            for i in np.unique(todo).tolist():
                self._fill(i)

    def _fill(self, i: int) -> None:
        raw = self._rust.id_to_token(i)
        self.known[i] = True
        if raw is None:
            return
        tok = self._tok
        if i in self._added:
            self.word_start[i] = True
            self.length[i] = len(raw)
            return
        bs = tok.token_bytes(raw)
        try:
            text = bs.decode("utf-8")
            partial = False
        except UnicodeDecodeError:
            text = bs.decode("utf-8", errors="ignore")
            partial = True
        self.partial[i] = partial
        # characters; a stray byte run counts as one (the count only, nothing is displayed)
        self.length[i] = len(bs.decode("utf-8", errors="replace")) if partial else len(text)
        if self._wordpiece:
            self.word_start[i] = not raw.startswith(self._prefix)
        else:
            self.word_start[i] = bool(bs) and bs[:1].isspace()
        self.space_only[i] = bool(bs) and bs.isspace()
        core = text.strip()
        self.punct[i] = bool(core) and not partial and all(unicodedata.category(ch)[0] in "PS" for ch in core)
        if self._byte_level:
            self.byte_piece[i] = len(raw) == 1 and len(bs) == 1 and bs[0] >= 0x80
        else:
            self.byte_piece[i] = tok.is_byte_piece(raw)


@memoize(maxsize=16)
def token_facts(tok: LoadedTokenizer) -> TokenFacts:
    """The lazily filled per-id facts of a tokenizer (cached by content hash, at most 16 kept)."""
    return TokenFacts(tok)


#: The tokenizers object measurements encode with (dropout off): :func:`analysis.measure.fast_encode.reference_tokenizer`.
rust_tokenizer = fast_encode.reference_tokenizer


def encode_ids(tok: LoadedTokenizer, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode lines without special tokens; return (flat token ids, tokens per line) as int64 arrays
    (:func:`analysis.measure.fast_encode.encode_ids`: gigatoken where verified identical, else tokenizers)."""
    return fast_encode.encode_ids(tok, lines)


def text_counts(lines: Sequence[str]) -> dict[str, Any]:
    """Per-line bytes, characters and whitespace words (int64 arrays) of a list of lines."""
    n = len(lines)
    return {
        "bytes": np.fromiter((len(s.encode("utf-8")) for s in lines), dtype=np.int64, count=n),
        "chars": np.fromiter(map(len, lines), dtype=np.int64, count=n),
        "words": np.fromiter((len(s.split()) for s in lines), dtype=np.int64, count=n),
    }


#: A whitespace "word" longer than this many characters on average means the script is written without
#: spaces (zh/ja/th/lo/km/my/bo...), where fertility per whitespace word is meaningless.
SPACELESS_CHARS_PER_WORD = 12.0


def continued_words(facts: TokenFacts, flat: np.ndarray, lens: np.ndarray) -> tuple[int, int]:
    """(words, words split into ≥ 2 tokens).

    Words are delimited by the tokenizer's word-start marks (leading space/▁, non-`##` WordPiece pieces), and
    punctuation/symbol-only tokens count as words of their own, as in the UD treebanks of Rust et al. (2021).
    """
    if flat.size == 0:
        return 0, 0
    line_start = np.zeros(flat.size, dtype=bool)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    line_start[starts[lens > 0]] = True
    space_only = facts.space_only[flat]
    after_space = np.zeros(flat.size, dtype=bool)
    after_space[1:] = space_only[:-1] & ~line_start[1:]
    # punctuation/symbol-only tokens are words of their own (as in UD treebanks, Rust et al. 2021)
    punct = facts.punct[flat]
    after_punct = np.zeros(flat.size, dtype=bool)
    after_punct[1:] = punct[:-1]
    start = (facts.word_start[flat] | line_start | after_space | punct | after_punct) & ~space_only
    keep = ~space_only
    s = start[keep]
    if s.size == 0:
        return 0, 0
    pos = np.flatnonzero(s)
    if pos.size == 0 or pos[0] != 0:
        pos = np.concatenate(([0], pos))
    seg = np.diff(np.concatenate((pos, [s.size])))
    return int(seg.size), int((seg >= 2).sum())


def chunk_totals(
    facts: TokenFacts, flat: np.ndarray, lens: np.ndarray, tc: dict[str, np.ndarray]
) -> dict[str, int]:
    """The additive totals of one chunk of lines (:func:`encode_ids` and :func:`text_counts` of the lines): the
    one place a total is counted, for the in-process path and every map task of a corpus job (which add them
    up). Keys: :data:`TOTALS`."""
    n_words_tok, n_cont = continued_words(facts, flat, lens)
    return {
        "sentences": int(lens.size),
        "tokens": int(flat.size),
        "bytes": int(tc["bytes"].sum()),
        "chars": int(tc["chars"].sum()),
        "words": int(tc["words"].sum()),
        "words_tok": n_words_tok,
        "continued": n_cont,
    }


#: The additive totals :func:`stats_from_counts` turns into metrics (every one a sum over sentences).
TOTALS = ("sentences", "tokens", "bytes", "chars", "words", "words_tok", "continued")


def bytes_per_token(tok: LoadedTokenizer, lines: Sequence[str]) -> float:
    """Corpus-level UTF-8 bytes per token (Σ bytes / Σ tokens, no special tokens, empty lines skipped)."""
    lines = [s for s in lines if s]
    if not lines:
        raise DataError("no non-empty lines to measure")
    n_tok = int(encode_ids(tok, lines)[0].size)
    n_bytes = sum(len(s.encode("utf-8")) for s in lines)
    return n_bytes / n_tok if n_tok else float("nan")
