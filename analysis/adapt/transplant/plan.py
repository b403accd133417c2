"""Which rows a transplanted model gets: tokens of the new tokenizer B that the model's own tokenizer A also has
(the same bytes, whatever each tokenizer's spelling — byte-level ``Ġ``, SentencePiece ``▁``, byte-fallback
``<0xNN>``) copy A's rows; special tokens are matched by their text, then by role (bos, eos, pad, unk, the chat
turn markers, end of text); every other id of B is initialised, from A's own reading of the token's bytes
(:func:`pieces_of_bytes`: the FVT pieces, and the sequence OMP reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.adapt.fvt import fvt_pieces
from analysis.bpe import bare_tokenize_fn
from analysis.errors import DataError
from analysis.tokenizer.alphabets import bytes_to_unicode
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Roles a special token can play, in the order the report lists them.
ROLES = ("bos", "eos", "pad", "unk", "turn_start", "turn_end", "end_of_text")
#: Chat and document markers known by their text, per role (the tokenizer config names only bos/eos/pad/unk).
MARKERS = {
    "turn_start": (
        "<|im_start|>",
        "<|start_header_id|>",
        "<start_of_turn>",
        "<|start|>",
        "[INST]",
        "<|user|>",
    ),
    "turn_end": ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "[/INST]", "<|eom_id|>"),
    "end_of_text": ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|end▁of▁sentence|>"),
}
#: How a row of B was filled (``TransplantPlan.how``).
COPIED_BYTES, COPIED_TEXT, COPIED_ROLE, INITIALISED = 1, 2, 3, 0
HOW = {
    COPIED_BYTES: "same bytes",
    COPIED_TEXT: "same special token",
    COPIED_ROLE: "same role",
    INITIALISED: "initialised",
}
_BYTE_CHARS = bytes_to_unicode()


def _content(v: Any) -> str | None:
    """A tokenizer-config special token's text (a string or an ``{"content": …}`` entry)."""
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) and v else None


def special_roles(tok: LoadedTokenizer, model_config: Mapping[str, Any] | None = None) -> dict[str, int]:
    """role → id for the special tokens of `tok`: bos/eos/pad/unk from its tokenizer config (the BOS its
    post-processor adds counts as bos), else from `model_config`'s ``*_token_id``; the chat and document markers of
    :data:`MARKERS` by their text among its added tokens."""
    out: dict[str, int] = {}
    added = {a.content: a.id for a in tok.added_tokens}
    known = {**tok.vocab, **added}
    plain = tok.tokenizer.encode("a", add_special_tokens=False).ids
    full = tok.tokenizer.encode("a", add_special_tokens=True).ids
    if len(full) > len(plain) and full[len(full) - len(plain) :] == plain:
        out["bos"] = full[0]
    for role, key in (("bos", "bos_token"), ("eos", "eos_token"), ("pad", "pad_token"), ("unk", "unk_token")):
        text = _content(tok.config.get(key))
        if role not in out and text is not None and text in known:
            out[role] = known[text]
        if role not in out and model_config:
            v = model_config.get(f"{role}_token_id")
            v = v[0] if isinstance(v, list) and v else v
            if isinstance(v, int) and not isinstance(v, bool) and v in tok.id_to_token:
                out[role] = v
    for role, names in MARKERS.items():
        hit = next((added[n] for n in names if n in added), None)
        if hit is not None:
            out[role] = hit
    return out


def pieces_of_bytes(tok: LoadedTokenizer, data: bytes, tokenize: Any = None) -> list[int]:
    """`tok`'s ids for the bytes `data` read as one word by its BPE model (no normalizer, no pre-tokenizer:
    :func:`analysis.adapt.fvt.fvt_pieces`), whatever the bytes are — a partial UTF-8 character included: a
    byte-level vocabulary reads them through its byte alphabet, a SentencePiece-style one as text with ``▁`` for
    spaces and ``<0xNN>`` pieces for bytes that are not UTF-8."""
    if not data:
        return []
    if tok.is_byte_level:
        return fvt_pieces(tok, "".join(_BYTE_CHARS[b] for b in data), tokenize=tokenize)
    text = data.decode("utf-8", errors="surrogateescape")
    parts = []
    for ch in text:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            parts.append(f"<0x{o - 0xDC00:02X}>")
        elif ch == " " and tok.is_sentencepiece_style:
            parts.append("▁")
        else:
            parts.append(ch)
    return fvt_pieces(tok, "".join(parts), tokenize=tokenize)


def reading(a_tok: LoadedTokenizer, b_tok: LoadedTokenizer, ids: list[int]) -> dict[int, list[int]]:
    """A's reading of each of B's `ids`: a special token's text through A's whole pipeline, any other token's
    bytes through A's BPE model (:func:`pieces_of_bytes`); an id without a token reads as nothing."""
    tokenize = bare_tokenize_fn(a_tok)
    b_added = {a.content for a in b_tok.added_tokens}
    out: dict[int, list[int]] = {}
    for j in ids:
        s = b_tok.id_to_token.get(j)
        if s is None:
            out[j] = []
        elif s in b_added:
            out[j] = list(a_tok.tokenizer.encode(s, add_special_tokens=False).ids)
        else:
            out[j] = pieces_of_bytes(a_tok, b_tok.token_bytes(s), tokenize)
    return out


@dataclass
class RoleMatch:
    """One special-token role: B's token for it, A's, and what the transplant did."""

    role: str
    b_id: int | None
    b_token: str | None
    a_id: int | None
    a_token: str | None
    #: "same token", "mapped by role", "no counterpart in A" (B's row initialised), "only in A"
    status: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return dict(self.__dict__)


@dataclass
class TransplantPlan:
    """Where every row of the transplanted model comes from."""

    a_name: str
    b_name: str
    #: B id → the A id whose rows it copies (−1: initialised)
    src: np.ndarray
    #: B id → how (:data:`HOW` codes)
    how: np.ndarray
    roles: list[RoleMatch]
    #: initialised B id → A ids of its reading (FVT pieces; OMP's sequence)
    pieces: dict[int, list[int]]
    #: A ids that B shares by bytes (OMP's dictionary), in A's id order
    shared_a_ids: list[int]
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows of the transplanted model (B's largest id + 1)."""
        return len(self.src)

    @property
    def initialised(self) -> list[int]:
        """B ids whose rows are initialised."""
        return np.flatnonzero(self.src < 0).tolist()

    def counts(self) -> dict[str, int]:
        """How many rows each way filled."""
        return {HOW[c]: int((self.how == c).sum()) for c in HOW}

    def o2e(self, a_top: int, prefer: Mapping[int, int] | None = None) -> np.ndarray:
        """A id → one B id carrying its row (−1: none): the one matched by bytes or text first, then by role,
        the lowest id among equals; `prefer` (A id → B id) overrides (e.g. the prefix tokens of both)."""
        out = np.full(a_top, -1, dtype=np.int64)
        for code in (COPIED_ROLE, COPIED_TEXT, COPIED_BYTES):  # later codes overwrite: bytes/text win
            js = np.flatnonzero(self.how == code)[::-1]  # lowest id written last
            out[self.src[js]] = js
        for a, b in (prefer or {}).items():
            if 0 <= a < a_top:
                out[a] = b
        return out


def plan_transplant(
    a_tok: LoadedTokenizer,
    b_tok: LoadedTokenizer,
    *,
    a_rows: int,
    a_config: Mapping[str, Any] | None = None,
    need_pieces: bool = True,
) -> TransplantPlan:
    """Match B's ids to A's rows (see the module docstring). `a_rows` is the number of embedding rows of A's
    model: DataError when A's tokenizer has ids beyond them; rows beyond A's ids (padding) are noted and not
    carried. `need_pieces` computes A's reading of every initialised token (FVT and OMP need it)."""
    a_top = max(a_tok.id_to_token) + 1
    if a_top > a_rows:
        raise DataError(
            f"{a_tok.name} has ids up to {a_top - 1:,} but its model only {a_rows:,} embedding rows: the model's "
            "tokenizer does not fit it (is this the model's own tokenizer?)"
        )
    notes = []
    if a_rows > a_top:
        notes.append(
            f"the model has {a_rows - a_top:,} rows beyond its tokenizer's ids (padding): not carried over"
        )
    b_top = max(b_tok.id_to_token) + 1
    gaps = b_top - len(b_tok.id_to_token)
    if gaps:
        notes.append(
            f"{b_tok.name} has {gaps:,} ids without a token below its largest id: their rows are initialised"
        )
    a_added = {a.content: a.id for a in a_tok.added_tokens}
    b_added = {a.content for a in b_tok.added_tokens}
    by_bytes: dict[bytes, int] = {}
    for i in sorted(a_tok.id_to_token):
        s = a_tok.id_to_token[i]
        if s in a_added:
            continue
        key = a_tok.token_bytes(s)
        j = by_bytes.get(key)
        if j is None or (a_tok.is_byte_piece(a_tok.id_to_token[j]) and not a_tok.is_byte_piece(s)):
            by_bytes[key] = i  # the lowest id; a regular piece before a <0xNN> byte piece of the same byte
    src = np.full(b_top, -1, dtype=np.int64)
    how = np.zeros(b_top, dtype=np.int8)
    for j, s in b_tok.id_to_token.items():
        if s in b_added:
            if s in a_added:
                src[j], how[j] = a_added[s], COPIED_TEXT
            continue
        i = by_bytes.get(b_tok.token_bytes(s))
        if i is not None:
            src[j], how[j] = i, COPIED_BYTES
    ra, rb = special_roles(a_tok, a_config), special_roles(b_tok)
    roles = []
    for role in ROLES:
        bj, ai = rb.get(role), ra.get(role)
        bt = None if bj is None else b_tok.id_to_token.get(bj)
        at = None if ai is None else a_tok.id_to_token.get(ai)
        if bj is None:
            if ai is not None:
                roles.append(RoleMatch(role, None, None, ai, at, "only in A"))
            continue
        if src[bj] >= 0:
            roles.append(
                RoleMatch(role, bj, bt, int(src[bj]), a_tok.id_to_token.get(int(src[bj])), "same token")
            )
        elif ai is not None and ai < a_rows:
            src[bj], how[bj] = ai, COPIED_ROLE
            roles.append(RoleMatch(role, bj, bt, ai, at, "mapped by role"))
        else:
            roles.append(RoleMatch(role, bj, bt, None, None, "no counterpart in A"))
    missing = [r.role for r in roles if r.status == "no counterpart in A"]
    if missing:
        notes.append(
            f"roles of {b_tok.name} without a counterpart in {a_tok.name}: {', '.join(missing)} (rows initialised)"
        )
    pieces = reading(a_tok, b_tok, np.flatnonzero(src < 0).tolist()) if need_pieces else {}
    shared = sorted({int(i) for i in src[how == COPIED_BYTES]})
    return TransplantPlan(a_tok.name, b_tok.name, src, how, roles, pieces, shared, notes)
