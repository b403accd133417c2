"""Side-by-side encodings of one text: counts, compression and where token boundaries differ."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: The longest text the side-by-side views encode (an encoding keeps ids, strings and offsets per token, so a
#: 100 MB paste would cost gigabytes); longer texts are refused with this number in the message.
MAX_CHARS = 1_000_000


def check_text(text: str) -> None:
    """DataError for a text longer than :data:`MAX_CHARS`."""
    if len(text) > MAX_CHARS:
        raise DataError(
            f"the text is {len(text):,} characters long; the side-by-side views take at most {MAX_CHARS:,} "
            "(measure whole corpora on the Compression page or with `python -m analysis compress`)"
        )


@dataclass
class EncodingView:
    """One tokenizer's encoding of the text, with its boundaries compared with the others'."""

    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]
    n_bytes: int
    n_chars: int
    boundaries: set[int] = field(default_factory=set)
    common_boundaries: set[int] = field(default_factory=set)
    n_differing: int = 0

    @property
    def n_tokens(self) -> int:
        """Number of tokens."""
        return len(self.ids)

    @property
    def bytes_per_token(self) -> float:
        """UTF-8 bytes of the text per token."""
        return self.n_bytes / self.n_tokens if self.ids else 0.0

    @property
    def chars_per_token(self) -> float:
        """Characters of the text per token."""
        return self.n_chars / self.n_tokens if self.ids else 0.0


def encode_view(tok: LoadedTokenizer, text: str, *, add_special_tokens: bool = False) -> EncodingView:
    """Encode text with one tokenizer and collect its token end offsets (character boundaries)."""
    check_text(text)
    enc = tok.tokenizer.encode(text, add_special_tokens=add_special_tokens)
    offsets = [tuple(o) for o in enc.offsets]
    bounds = {e for s, e in offsets if e > s}
    return EncodingView(
        ids=list(enc.ids),
        tokens=list(enc.tokens),
        offsets=offsets,
        n_bytes=len(text.encode("utf-8")),
        n_chars=len(text),
        boundaries=bounds,
    )


def compare_encodings(
    toks: list[LoadedTokenizer], text: str, *, add_special_tokens: bool = False
) -> list[EncodingView]:
    """Encode with every tokenizer; mark, for each, the boundaries the other tokenizers do not share."""
    views = [encode_view(t, text, add_special_tokens=add_special_tokens) for t in toks]
    for i, v in enumerate(views):
        others = [w.boundaries for j, w in enumerate(views) if j != i]
        common = set.intersection(*others) if others else set(v.boundaries)
        v.common_boundaries = common
        v.n_differing = len(v.boundaries - common)
    return views


@dataclass(frozen=True)
class BoundaryDiff:
    """A stretch of the text between two boundaries every tokenizer shares, split differently by them."""

    start: int
    end: int
    text: str
    pieces: list[list[str]]  # per tokenizer (in the order given), the text between its boundaries


def boundary_diff(text: str, views: list[EncodingView]) -> list[BoundaryDiff]:
    """The compact diff of token boundaries: the stretches of `text` that the tokenizers split differently.

    The text is cut at the boundaries all encodings share (and its ends); a stretch is listed when some
    encoding has a boundary inside it (such a boundary is, by construction, not shared by all). Boundaries are
    character positions where a token ends, so byte-level pieces of one character count as one piece.
    """
    if len(views) < 2:
        return []
    cuts = sorted(set.intersection(*(v.boundaries for v in views)) | {0, len(text)})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        inner = [sorted(x for x in v.boundaries if a < x < b) for v in views]
        if not any(inner):
            continue
        pieces = [[text[s:e] for s, e in zip([a, *cut], [*cut, b])] for cut in inner]
        out.append(BoundaryDiff(a, b, text[a:b], pieces))
    return out


def pre_tokens(tok: LoadedTokenizer, text: str) -> tuple[str, list[tuple[str, tuple[int, int]]]]:
    """The tokenizer's normalizer and pre-tokenizer applied to `text`: (normalized text, [(pre-token, offsets)])."""
    check_text(text)
    rust = tok.tokenizer
    normalized = rust.normalizer.normalize_str(text) if rust.normalizer is not None else text
    if rust.pre_tokenizer is None:
        return normalized, [(normalized, (0, len(normalized)))]
    return normalized, rust.pre_tokenizer.pre_tokenize_str(normalized)
