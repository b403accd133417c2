"""Vocabulary diff and overlap between tokenizers: shared tokens, tokens unique to each, Jaccard indices.

Tokens are compared by what they stand for (their UTF-8 bytes, so GPT-2's `Ġthe`, Llama-2's `▁the` and a plain
` the` are the same token) or, with ``by="raw"``, by their raw vocabulary strings. Added tokens (special or not)
are compared by their content in both modes.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Literal

from analysis.errors import DataError
from analysis.tokenizer.alphabets import readable_from_bytes
from analysis.tokenizer.tokenizer import LoadedTokenizer

By = Literal["bytes", "raw"]
#: What tokens are compared by, with the page's label (the CLI's `--by` choices and the page's options): the
#: bytes they stand for, or their raw vocabulary strings.
BY_LABELS: dict[str, str] = {"bytes": "What tokens stand for (bytes)", "raw": "Raw vocabulary strings"}
BY_CHOICES: tuple[str, ...] = tuple(BY_LABELS)


@dataclass(frozen=True)
class UniqueToken:
    """A token of one tokenizer that none of the others has."""

    token: str
    readable: str
    id: int
    n_bytes: int

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return {"token": self.token, "readable": self.readable, "id": self.id, "bytes": self.n_bytes}


@dataclass(frozen=True)
class PairOverlap:
    """The overlap of two tokenizers' vocabularies."""

    a: str
    b: str
    shared: int
    union: int

    @property
    def jaccard(self) -> float:
        """|A ∩ B| / |A ∪ B| (0 for two empty vocabularies)."""
        return self.shared / self.union if self.union else 0.0

    def to_json(self) -> dict[str, Any]:
        """The pair as a JSON object."""
        return {"a": self.a, "b": self.b, "shared": self.shared, "union": self.union, "jaccard": self.jaccard}


@dataclass
class VocabDiff:
    """The diff of 2–8 vocabularies: sizes, pairwise overlaps, tokens shared by all and unique to each."""

    names: list[str]
    by: str
    sizes: dict[str, int]
    pairs: list[PairOverlap]
    shared_by_all: int
    union: int
    unique: dict[str, list[UniqueToken]] = field(default_factory=dict)

    def pair(self, a: str, b: str) -> PairOverlap:
        """The overlap of two of the tokenizers (in either order)."""
        for p in self.pairs:
            if {p.a, p.b} == {a, b}:
                return p
        raise KeyError((a, b))

    def to_json(self) -> dict[str, Any]:
        """The whole diff as one JSON object (unique tokens in id order)."""
        return {
            "names": self.names,
            "by": self.by,
            "sizes": self.sizes,
            "shared_by_all": self.shared_by_all,
            "union": self.union,
            "pairs": [p.to_json() for p in self.pairs],
            "unique": {n: [u.to_json() for u in rows] for n, rows in self.unique.items()},
        }

    def unique_csv(self, name: str) -> str:
        """The tokens unique to one tokenizer as CSV text (token, readable, id, bytes)."""
        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(["token", "readable", "id", "bytes"])
        for u in self.unique[name]:
            w.writerow([u.token, u.readable, u.id, u.n_bytes])
        return out.getvalue()


def vocabulary_keys(tok: LoadedTokenizer, by: By = "bytes") -> dict[Any, tuple[str, int]]:
    """key → (raw token, id) over the model vocabulary and the added tokens; the lowest id wins a shared key."""
    if by not in ("bytes", "raw"):
        raise DataError(f"compare vocabularies by 'bytes' or 'raw', not {by!r}")
    out: dict[Any, tuple[str, int]] = {}
    added = {a.content for a in tok.added_tokens}
    for tid, token in sorted(tok.id_to_token.items()):
        if token in added:
            key: Any = ("added", token)
        elif by == "bytes":
            key = tok.token_bytes(token)
        else:
            key = token
        out.setdefault(key, (token, tid))
    return out


def vocab_diff(toks: list[LoadedTokenizer], names: list[str] | None = None, *, by: By = "bytes") -> VocabDiff:
    """Compare the vocabularies of 2–8 tokenizers (see the module docstring for what counts as the same token)."""
    if not 2 <= len(toks) <= 8:
        raise DataError(f"compare 2 to 8 tokenizers, not {len(toks)}")
    names = list(names or [t.name for t in toks])
    if len(set(names)) != len(names):
        raise DataError("give every tokenizer a different name")
    keys = [vocabulary_keys(t, by) for t in toks]
    sets = [set(k) for k in keys]
    pairs = [
        PairOverlap(names[i], names[j], len(sets[i] & sets[j]), len(sets[i] | sets[j]))
        for i, j in combinations(range(len(toks)), 2)
    ]
    unique: dict[str, list[UniqueToken]] = {}
    for i, (tok, k) in enumerate(zip(toks, keys)):
        others = set().union(*(s for j, s in enumerate(sets) if j != i))
        rows = []
        for key in sets[i] - others:
            token, tid = k[key]
            bs = key if isinstance(key, bytes) else tok.token_bytes(token)
            shown = token if isinstance(key, tuple) else readable_from_bytes(bs)
            rows.append(UniqueToken(token, shown, tid, len(bs)))
        unique[names[i]] = sorted(rows, key=lambda u: u.id)
    return VocabDiff(
        names=names,
        by=by,
        sizes={n: len(s) for n, s in zip(names, sets)},
        pairs=pairs,
        shared_by_all=len(set.intersection(*sets)),
        union=len(set.union(*sets)),
        unique=unique,
    )
