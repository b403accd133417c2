"""How an edited tokenizer's ids relate to the original's: which ids are new, which were removed, the one id
correspondence the model check reads the edited side through (:class:`EditedVocab`; by token string, or a method's
own, e.g. R-BPE's reused ids), and which predictions of two tokenizations are the same token at the same bytes
(:func:`aligned_positions`). Used by :mod:`analysis.evaluate.comparison`, :mod:`analysis.adapt.warmup` and
``analysis.methods.reuse.model``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from analysis.tokenizer.tokenizer import LoadedTokenizer


def new_ids(original: LoadedTokenizer, edited: LoadedTokenizer) -> list[int]:
    """Ids of `edited` whose token string `original` lacks (the rows an extension initialises)."""
    have = set(original.vocab) | {a.content for a in original.added_tokens}
    return sorted(i for i, s in edited.id_to_token.items() if s not in have)


def removed_ids(original: LoadedTokenizer, edited: LoadedTokenizer) -> list[int]:
    """Ids of `original` whose token string `edited` lacks (what a pruning removed)."""
    have = set(edited.vocab) | {a.content for a in edited.added_tokens}
    return sorted(i for i, s in original.id_to_token.items() if s not in have)


@dataclass
class EditedVocab:
    """How the edited model's ids relate to the original's: what :func:`compare` reads the edited side through.

    From two tokenizers (:meth:`from_tokenizers`) ids correspond by token string. A method whose ids keep their
    numbers while their meaning changes (R-BPE's reused ids) builds its own (``analysis.methods.reuse``)."""

    #: the edited model's name in messages
    name: str
    #: the tokenizer whose BOS/specials give the prefix token (:func:`analysis.model.bpb.prefix_token`)
    tok: LoadedTokenizer
    #: lines → edited ids (no special tokens)
    encode: Callable[[list[str]], list[list[int]]]
    #: original id → the edited id with the same meaning (-1: none)
    o2e: np.ndarray
    #: edited ids the original has no counterpart for (their rows were initialised by the edit)
    new: list[int]
    #: original ids without a counterpart in the edited vocabulary
    removed: list[int]
    #: UTF-8 bytes each edited id stands for
    byte_len: np.ndarray
    #: the token string of each new id (labels)
    tokens: dict[int, str]
    #: the edit's own reading of its new tokens, for a bake-off of their rows (new id → original ids: the FVT pieces,
    #: OMP's sequence) when token strings do not give it (a transplant); None: from the strings
    init_pieces: Callable[[], dict[int, list[int]]] | None = None
    #: OMP's dictionary for such an edit (original ids; None: the first original ids)
    anchors: list[int] | None = None

    @property
    def top(self) -> int:
        """The largest edited id + 1 (rows the edited model needs)."""
        return len(self.byte_len)

    @classmethod
    def from_tokenizers(cls, original: LoadedTokenizer, edited: LoadedTokenizer) -> EditedVocab:
        """Ids that correspond by token string (extension, pruning, any edit written as one tokenizer)."""
        e_ids = {s: i for i, s in edited.id_to_token.items()}
        o2e = np.full(max(original.id_to_token) + 1, -1, dtype=np.int64)
        for i, s in original.id_to_token.items():
            o2e[i] = e_ids.get(s, -1)
        new = new_ids(original, edited)

        def encode(lines: list[str]) -> list[list[int]]:
            return [e.ids for e in edited.tokenizer.encode_batch_fast(lines, add_special_tokens=False)]

        return cls(edited.name, edited, encode, o2e, new, removed_ids(original, edited), byte_lengths(edited),
                   {i: edited.id_to_token[i] for i in new})  # fmt: skip


def byte_lengths(tok: LoadedTokenizer) -> np.ndarray:
    """The UTF-8 byte length of every id's token (0 for gaps)."""
    out = np.zeros(max(tok.id_to_token) + 1, dtype=np.int64)
    added = {a.id for a in tok.added_tokens}
    for i, s in tok.id_to_token.items():
        out[i] = len(s.encode("utf-8")) if i in added else len(tok.token_bytes(s))
    return out


def _starts(seq: Sequence[int], lengths: np.ndarray) -> np.ndarray:
    """Byte offset where each token of `seq` (after the prefix at position 0) starts; position 0 → −1."""
    lens = lengths[np.asarray(seq[1:], dtype=np.int64)]
    return np.concatenate([[-1], np.concatenate([[0], np.cumsum(lens)[:-1]])])


def aligned_positions(
    old_seq: Sequence[int],
    new_seq: Sequence[int],
    old_len: np.ndarray,
    new_len: np.ndarray,
    same: Callable[[int, int], bool],
) -> list[tuple[int, int]]:
    """(old position, new position) pairs of targets (positions ≥ 1) that start at the same byte, have the same
    length and the same string (`same(old_id, new_id)`): the predictions both models make for the same token."""
    if len(old_seq) < 2 or len(new_seq) < 2:
        return []
    so, sn = _starts(old_seq, old_len), _starts(new_seq, new_len)
    at = {int(b): p for p, b in enumerate(so) if p >= 1}
    out = []
    for q in range(1, len(new_seq)):
        p = at.get(int(sn[q]))
        if p is not None and old_len[old_seq[p]] == new_len[new_seq[q]] and same(old_seq[p], new_seq[q]):
            out.append((p, q))
    return out
