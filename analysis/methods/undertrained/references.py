"""Reference tokens: tokens known to be untrained, whose rows the indicators measure distances to.

Automatic choice (:func:`auto_references`): bytes that never occur in UTF-8, unused/reserved special tokens,
embedding rows beyond the tokenizer, groups of exactly identical rows; only when none of those exist,
STT-unreachable tokens and then tokens that encoding never produces. Or the user's own ids
(:func:`user_references`, :func:`parse_reference_spec`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.bpe import unreachable_ids
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .roundtrip import UNREACHABLE_MULTI, UNREACHABLE_SINGLE, RoundTrip

INVALID_UTF8_BYTES = (0xC0, 0xC1, *range(0xF5, 0x100))
_UNUSED_NAME = re.compile(r"^[<\[]\|?\s*(unused|reserved)[\w\- ]*\|?[>\]]$", re.I)


@dataclass
class References:
    """Reference token ids (known to be untrained) with a reason each; held-out ones validate the choice."""

    ids: list[int]
    reasons: dict[int, str]
    held_out: list[int] = field(default_factory=list)
    source: str = "auto"

    def summary(self) -> list[dict[str, Any]]:
        """Counts per reason kind (the text before the first colon of each reason)."""
        out: dict[str, int] = {}
        for i in self.ids:
            k = self.reasons.get(i, "").split(":")[0]
            out[k] = out.get(k, 0) + 1
        return [{"reason": k, "count": v} for k, v in out.items()]


def _natural_key(s: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


def auto_references(
    tok: LoadedTokenizer,
    n_rows: int | None = None,
    *,
    max_named: int = 10,
    max_rows: int = 100,
    padding_norms: np.ndarray | None = None,
    use_unreachable: bool = True,
    round_trip: RoundTrip | None = None,
    duplicate_groups: list[list[int]] | None = None,
) -> References:
    """Pick reference tokens for a vocabulary: impossible UTF-8 bytes, unused/reserved specials, rows
    beyond the tokenizer size, groups of exactly identical (never updated) rows; only when none of those exist, STT-unreachable tokens, and then tokens that
    encoding never produces (round-trip unreachable, §2.2; e.g. letter+digit tokens under a digit-splitting
    pre-tokenizer)."""
    reasons: dict[int, str] = {}
    held: list[int] = []
    vocab = tok.vocab
    # (a) bytes that never occur in UTF-8
    if tok.is_byte_level:
        for b in INVALID_UTF8_BYTES:
            i = vocab.get(BYTE_TO_CHAR[b])
            if i is not None:
                reasons[i] = (
                    f"invalid UTF-8 byte: byte-level token for 0x{b:02X} can never occur in UTF-8 text"
                )
    elif tok.byte_fallback:
        for b in INVALID_UTF8_BYTES:
            i = vocab.get(f"<0x{b:02X}>")
            if i is not None:
                reasons[i] = (
                    f"invalid UTF-8 byte: byte piece <0x{b:02X}> can never be emitted by byte fallback"
                )
        for b in range(0x21, 0x7F):
            i = vocab.get(f"<0x{b:02X}>")
            if i is not None and chr(b) in vocab:
                reasons[i] = (
                    f"duplicate byte piece: <0x{b:02X}> duplicates the piece {chr(b)!r}, "
                    "so byte fallback never emits it"
                )
    # (b) <unused…>, [unusedN], reserved specials
    named = sorted(
        ((t, i) for i, t in tok.id_to_token.items() if _UNUSED_NAME.match(t)),
        key=lambda x: (x[1], _natural_key(x[0])),
    )
    for k, (t, i) in enumerate(named):
        if k < max_named:
            reasons[i] = f"unused/reserved special: {t} (first {min(max_named, len(named))} of {len(named)})"
        else:
            held.append(i)
    # (c) rows beyond the tokenizer
    if n_rows is not None and n_rows > tok.vocab_size:
        rows = range(tok.vocab_size, n_rows)
        taken = 0
        for r in rows:
            if padding_norms is not None and padding_norms[r - tok.vocab_size] <= 1e-8:
                continue  # all-zero padding rows carry no direction
            if taken >= max_rows:
                held.append(r)
                continue
            reasons[r] = f"row beyond the tokenizer: embedding row {r} ≥ tokenizer size {tok.vocab_size}"
            taken += 1
    # (c2) groups of identical rows: tokens whose rows never diverged were never updated
    if duplicate_groups:
        taken = 0
        for g in duplicate_groups:
            for r in g:
                if r in reasons or taken >= max_rows:
                    continue
                name = tok.readable(tok.id_to_token[r]) if r in tok.id_to_token else f"row {r}"
                reasons[r] = (
                    f"identical rows: {name!r} shares its embedding row exactly with {len(g) - 1} other "
                    "token(s), so it was never updated"
                )
                taken += 1
    # (d) STT-unreachable tokens, as a fallback
    if not reasons and use_unreachable:
        try:
            un = sorted(unreachable_ids(tok))
        except UnsupportedTokenizerError:
            un = []
        for i in un[:max_rows]:
            reasons[i] = (
                f"STT-unreachable: {tok.id_to_token.get(i)!r} cannot be produced by the tokenizer's merges"
            )
    if not reasons and use_unreachable and round_trip is not None:
        un = [
            i
            for i, c in enumerate(round_trip.categories)
            if c in (UNREACHABLE_SINGLE, UNREACHABLE_MULTI) and i not in tok.added_ids
        ]
        for i in un[:max_rows]:
            reasons[i] = (
                f"never produced by encoding: decode→encode of {tok.readable(tok.id_to_token[i])!r} "
                "gives other tokens, so the model never saw this id"
            )
        held.extend(un[max_rows:])
    return References(sorted(reasons), reasons, held_out=held, source="auto")


def user_references(ids: Iterable[int], tok: LoadedTokenizer | None = None) -> References:
    """References picked by the user (ids)."""
    ids = sorted({int(i) for i in ids})
    names = tok.id_to_token if tok is not None else {}
    return References(ids, {i: f"picked by the user: {names.get(i, f'row {i}')}" for i in ids}, source="user")


def parse_reference_spec(spec: str, tok: LoadedTokenizer) -> list[int]:
    """Parse `"3,5-9,[unused0]"` style input: ids, id ranges or token strings."""
    out: list[int] = []
    n = tok.vocab_size

    def check(i: int, part: str) -> int:
        if not 0 <= i < n:
            raise DataError(f"reference {part!r}: id {i} is outside the vocabulary (0–{n - 1})")
        return i

    for part in re.split(r"[,\s]+", spec.strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)-(\d+)", part)
        if m:
            a, b = check(int(m.group(1)), part), check(int(m.group(2)), part)
            if b < a:
                raise DataError(f"reference range {part!r} is empty (it ends before it starts)")
            out.extend(range(a, b + 1))
        elif part.isdigit():
            out.append(check(int(part), part))
        else:
            i = tok.tokenizer.token_to_id(part)
            if i is None:
                raise DataError(f"reference token {part!r} is not in the vocabulary")
            out.append(i)
    return out
