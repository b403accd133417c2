"""Vocabulary diff and overlap between tokenizers: shared tokens, tokens unique to each, Jaccard indices.

Tokens are compared by what they stand for (their UTF-8 bytes, so GPT-2's `Ġthe`, Llama-2's `▁the` and a plain
` the` are the same token) or, with ``by="raw"``, by their raw vocabulary strings. Added tokens (special or not)
are compared by their content in both modes.
"""

from __future__ import annotations

import csv
import io
import threading
from dataclasses import dataclass, field
from itertools import accumulate, combinations
from typing import Any, Literal, NamedTuple

from analysis.core.cache import memoize
from analysis.core.memory import no_cyclic_gc
from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.tokenizer.alphabets import BYTE_LEVEL_ALPHABET, BYTE_LEVEL_TABLE, readable_from_bytes
from analysis.tokenizer.tokenizer import LoadedTokenizer

By = Literal["bytes", "raw"]
#: What tokens are compared by, with the page's label (the CLI's `--by` choices and the page's options): the
#: bytes they stand for, or their raw vocabulary strings.
BY_LABELS: dict[str, str] = {"bytes": "What tokens stand for (bytes)", "raw": "Raw vocabulary strings"}
BY_CHOICES: tuple[str, ...] = tuple(BY_LABELS)
#: The largest vocabulary (tokens, added ones included) compared by default, and what the page allows: the largest
#: published vocabularies have about 260,000 tokens; a 2,000,000-token upload would hold a server for seconds and
#: about a gigabyte. The CLI's `--max-vocab` raises it up to :data:`MAX_VOCAB_LIMIT`.
MAX_VOCAB = 600_000
MAX_VOCAB_LIMIT = 5_000_000
_LOCAL = threading.local()


class UniqueToken(NamedTuple):
    """A token of one tokenizer that none of the others has (a named tuple: a diff may list millions)."""

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
    ids, tokens, keys = _keyed(tok, _check_by(by))
    first = _first_index(keys)
    return {k: (tokens[i], ids[i]) for k, i in first.items()}


def _check_by(by: str) -> By:
    if by not in BY_CHOICES:
        raise DataError(f"compare vocabularies by 'bytes' or 'raw', not {by!r}")
    return by  # type: ignore[return-value]


def _keyed(tok: LoadedTokenizer, by: By) -> tuple[list[int], list[str], list[Any]]:
    """The ids in order, their raw tokens and the key each is compared by (an added token by its content)."""
    id_to_token = tok.id_to_token
    ids = sorted(id_to_token)
    tokens = [id_to_token[i] for i in ids]
    added = {a.content for a in tok.added_tokens}
    if by == "raw":
        keys: list[Any] = list(tokens)
    else:
        plain = [k for k, t in enumerate(tokens) if t not in added] if added else range(len(tokens))
        keys = _bytes_of(tok, [tokens[k] for k in plain], plain, len(tokens))
    if added:
        for k, t in enumerate(tokens):
            if t in added:
                keys[k] = ("added", t)
    return ids, tokens, keys


def _bytes_of(tok: LoadedTokenizer, plain: list[str], where: Any, n: int) -> list[Any]:
    """The bytes each token of `plain` stands for, at positions `where` of a list of `n` keys.

    A byte-level vocabulary is mapped in one pass (one `str.translate` of all its tokens joined, then sliced: each
    byte-level character is one byte), so that a vocabulary of millions of tokens costs seconds, not minutes;
    anything else goes token by token through :meth:`LoadedTokenizer.token_bytes`.
    """
    keys: list[Any] = [None] * n
    joined = "".join(plain)
    if tok.is_byte_level and BYTE_LEVEL_ALPHABET.issuperset(joined):
        blob = joined.translate(BYTE_LEVEL_TABLE).encode("latin-1")
        cuts = list(accumulate(map(len, plain), initial=0))
        values: Any = (blob[a:b] for a, b in zip(cuts, cuts[1:]))
    else:
        values = map(tok.token_bytes, plain)
    for k, v in zip(where, values):
        keys[k] = v
    return keys


def _first_index(keys: list[Any]) -> dict[Any, int]:
    """key → the position of its first occurrence (the lowest id when the keys are in id order)."""
    n = len(keys)
    return dict(zip(reversed(keys), range(n - 1, -1, -1)))


def check_sizes(toks: list[LoadedTokenizer], names: list[str], max_vocab: int = MAX_VOCAB) -> None:
    """DataError, before any work, when a vocabulary is larger than `max_vocab` tokens (added ones included)."""
    if not 1 <= max_vocab <= MAX_VOCAB_LIMIT:
        raise DataError(f"the vocabulary limit must be 1 to {MAX_VOCAB_LIMIT:,} tokens, not {max_vocab:,}")
    for tok, name in zip(toks, names):
        if tok.vocab_size > max_vocab:
            raise DataError(
                f"{name} has {tok.vocab_size:,} tokens; the vocabulary diff compares vocabularies of at most "
                f"{max_vocab:,} tokens (the largest published ones have about 260,000); on the command line, "
                f"`vocab-diff --max-vocab N` allows up to {MAX_VOCAB_LIMIT:,}"
            )


def vocab_diff(
    toks: list[LoadedTokenizer],
    names: list[str] | None = None,
    *,
    by: By = "bytes",
    max_vocab: int = MAX_VOCAB,
    progress: Progress | None = None,
) -> VocabDiff:
    """Compare the vocabularies of 2–8 tokenizers (see the module docstring for what counts as the same token).

    Vocabularies over `max_vocab` tokens are refused before any work. Linear in the vocabulary sizes; the last
    results are remembered (keyed by the tokenizers' content), and a first computation reports `progress`
    (tokenizers read, then unique tokens listed).
    """
    if not 2 <= len(toks) <= 8:
        raise DataError(f"compare 2 to 8 tokenizers, not {len(toks)}")
    names = list(names or [t.name for t in toks])
    if len(set(names)) != len(names):
        raise DataError("give every tokenizer a different name")
    check_sizes(toks, names, max_vocab)
    _LOCAL.progress = progress
    try:
        return _vocab_diff(tuple(toks), tuple(names), _check_by(by))
    finally:
        _LOCAL.progress = None


@memoize(maxsize=2)
def _vocab_diff(toks: tuple[LoadedTokenizer, ...], names: tuple[str, ...], by: By) -> VocabDiff:
    progress = getattr(_LOCAL, "progress", None)
    steps = 2 * len(toks)
    with (
        no_cyclic_gc()
    ):  # millions of keys and rows, no cycles: the collector's passes would cost more than the work
        keyed, firsts = [], []
        for i, (tok, name) in enumerate(zip(toks, names)):
            report(progress, i, steps, f"reading the vocabulary of {name} ({tok.vocab_size:,} tokens)")
            ids, tokens, keys = _keyed(tok, by)
            keyed.append((ids, tokens, keys))
            firsts.append(_first_index(keys))
        sets = [d.keys() for d in firsts]
        report(progress, len(toks), steps, "comparing")
        pairs = [
            PairOverlap(names[i], names[j], len(sets[i] & sets[j]), len(sets[i] | sets[j]))
            for i, j in combinations(range(len(toks)), 2)
        ]
        shared_by_all = set(sets[0]).intersection(*sets[1:])
        union = set(sets[0]).union(*sets[1:])
        unique: dict[str, list[UniqueToken]] = {}
        for i, (tok, name) in enumerate(zip(toks, names)):
            report(progress, len(toks) + i, steps, f"listing the tokens only in {name}")
            others = set().union(*(s for j, s in enumerate(sets) if j != i))
            ids, tokens, keys = keyed[i]
            first = firsts[i]
            where = sorted(first[key] for key in sets[i] - others)  # positions, in id order
            if by == "bytes" and not tok.added_tokens:  # every key is the token's bytes: no call per row
                unique[name] = [
                    UniqueToken(tokens[k], readable_from_bytes(keys[k]), ids[k], len(keys[k])) for k in where
                ]
            else:
                unique[name] = [_unique_row(tok, tokens[k], ids[k], keys[k]) for k in where]
        report(progress, steps, steps, "done")
        return VocabDiff(
            names=list(names),
            by=by,
            sizes={n: len(s) for n, s in zip(names, sets)},
            pairs=pairs,
            shared_by_all=len(shared_by_all),
            union=len(union),
            unique=unique,
        )


def _unique_row(tok: LoadedTokenizer, token: str, tid: int, key: Any) -> UniqueToken:
    """The row of a token unique to `tok`: an added token as written, any other by the text its bytes stand for."""
    bs = key if isinstance(key, bytes) else tok.token_bytes(token)
    shown = token if isinstance(key, tuple) else readable_from_bytes(bs)
    return UniqueToken(token, shown, tid, len(bs))
