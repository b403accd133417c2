"""Ids → text: parse an id list as users paste it and decode it with a tokenizer, token by token and as a whole."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: The most ids one call decodes (a pasted id list is a few thousand at most; this bounds the work).
MAX_IDS = 200_000
_SEPARATORS = re.compile(r"[\s,;\[\]()]+")
#: An id as people paste it: ASCII digits only (Python's `int` also reads "٣" or "１２", which no tokenizer prints),
#: at most 18 of them (no vocabulary comes near 10**18; a longer run of digits is a pasted hash or a number, and
#: `int` refuses more than 4,300 digits with a ValueError of its own).
_ID = re.compile(r"[0-9]{1,18}")


def parse_ids(text: str) -> list[int]:
    """Ids from text such as `1 2 3`, `[1, 2, 3]` or `tensor([[1, 2]])`; DataError names the first bad item."""
    body = text.strip()
    if body.startswith("tensor(") and body.endswith(")"):
        body = body[len("tensor(") : -1]
    for opening, closing in ("[]", "()"):
        if body.count(opening) != body.count(closing):
            raise DataError(
                f"the brackets do not pair up ({body.count(opening)} {opening!r}, {body.count(closing)} "
                f"{closing!r}): was the list cut off when it was copied?"
            )
    items = [x for x in _SEPARATORS.split(body) if x]
    if len(items) > MAX_IDS:
        raise DataError(f"{len(items):,} ids given; decode at most {MAX_IDS:,} at a time")
    out = []
    for k, item in enumerate(items, 1):
        if not _ID.fullmatch(item):
            why = "too large for a token id" if item.isascii() and item.isdigit() else "not a token id"
            raise DataError(f"item {k} ({item[:20]!r}) is {why} (ids are whole numbers ≥ 0, written 0–9)")
        out.append(int(item))
    return out


@dataclass(frozen=True)
class DecodedToken:
    """One id: its raw vocabulary string and the text it stands for (None for an id outside the vocabulary)."""

    id: int
    token: str | None
    readable: str | None
    special: bool

    def to_json(self) -> dict[str, Any]:
        """The token as a JSON object."""
        return {"id": self.id, "token": self.token, "readable": self.readable, "special": self.special}


@dataclass
class Decoded:
    """The decoding of an id list: the text (with or without special tokens) and each id on its own."""

    ids: list[int]
    text: str
    tokens: list[DecodedToken]
    unknown: list[int]
    skip_special: bool

    @property
    def n_decoded(self) -> int:
        """How many of the ids went into :attr:`text`: ids outside the vocabulary are left out, and so are special
        tokens when they are skipped."""
        return sum(1 for t in self.tokens if t.token is not None and not (self.skip_special and t.special))

    def to_json(self) -> dict[str, Any]:
        """The decoding as one JSON object."""
        return {
            "ids": self.ids,
            "text": self.text,
            "unknown": self.unknown,
            "decoded": self.n_decoded,
            "skip_special": self.skip_special,
            "tokens": [t.to_json() for t in self.tokens],
        }


def decode_ids(tok: LoadedTokenizer, ids: list[int], *, skip_special: bool = False) -> Decoded:
    """Decode `ids` with the tokenizer's own decoder; ids outside the vocabulary are listed, not decoded."""
    specials = {a.id for a in tok.special_tokens}
    id_to_token = tok.id_to_token
    tokens = []
    for i in ids:
        t = id_to_token.get(i)
        tokens.append(DecodedToken(i, t, None if t is None else tok.readable(t), i in specials))
    unknown = sorted({i for i in ids if i not in id_to_token})
    known = [i for i in ids if i in id_to_token]
    text = tok.tokenizer.decode(known, skip_special_tokens=skip_special)
    return Decoded(ids=list(ids), text=text, tokens=tokens, unknown=unknown, skip_special=skip_special)
