"""Word collection for BPE training: pre-token counts through a tokenizer's own pipeline and the base model's
current segmentation of each distinct pre-token (:mod:`analysis.bpe.training` and the corpus jobs' ``words`` and
``pretokens`` statistics use them).

Pre-tokens are counted per distinct space-separated piece where that is exact (:class:`_ChunkPretokenizer`), else
per text unit; segmented words are kept as tuples of vocabulary ids where they travel between a corpus job's stages
(:func:`segment_ids`), as tuples of the vocabulary's own strings otherwise (:func:`segment_words`).
"""

from __future__ import annotations

import codecs
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, islice
from operator import itemgetter
from typing import Any

import numpy as np

from analysis.core.cache import memoize
from analysis.core.memory import no_cyclic_gc
from analysis.core.unicode import stable_letter_run
from analysis.errors import UnsupportedTokenizerError
from analysis.tokenizer.alphabets import SPIECE_UNDERLINE
from analysis.tokenizer.tokenizer import LoadedTokenizer


def _deterministic_tokenizer(tok: LoadedTokenizer):
    """A Rust tokenizer with BPE dropout off, for read-only use: the shared one, or a private copy with the
    runtime flag switched off."""
    if not tok.dropout:
        return tok.tokenizer
    tk = tok.fresh_tokenizer()
    tk.model.dropout = None  # type: ignore[attr-defined]
    return tk


def added_token_splitter(tok: LoadedTokenizer) -> Callable[[str], list[str]]:
    """A function splitting text around the tokenizer's added/special tokens (those parts are dropped)."""
    contents = sorted({a.content for a in tok.added_tokens if a.content}, key=len, reverse=True)
    if not contents:
        return lambda text: [text]
    rx = re.compile("|".join(re.escape(c) for c in contents))

    def split(text: str) -> list[str]:
        if rx.search(text) is None:
            return [text]
        return [p for p in rx.split(text) if p]

    return split


#: Split patterns (Sequence[Split(Isolated), ByteLevel(use_regex=False)]) under which a pre-token never holds a
#: non-space character followed by a space, and no match looks behind or past such a position: Llama-3 /
#: cl100k and Qwen2 (GPT-2's own pattern, ByteLevel(use_regex=True), has the same property).
_SPACE_SAFE_SPLITS = frozenset(
    {
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    }
)
#: a cut before every space that follows a non-space character
_SPACE_CUT = re.compile(r"(?<=\S)(?= )")


def _byte_map() -> dict[int, str]:
    """GPT-2's byte → printable character table (the ByteLevel pre-tokenizer's)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(extra)) for b in range(256)}


#: ASCII punctuation but the apostrophe (contractions): characters a byte-level pattern keeps together as one
#: run, apart from the letters before them (``[^\s\p{L}\p{N}]+``)
_SUFFIX_PUNCT = "".join(c for c in string.punctuation if c != "'")
#: pieces the one-token and suffix rules are checked on against the real pre-tokenizer
_CHECK_PIECES = (" word", " éàõž", " Ġx", " ÿĀ", " Привет", " 東京", " 한국어", " Ελλάδα.", " العربية", " word,",
                 " end).", ' Ærø?!"', " x%-", "word.", " ==", " ->", ' ",')  # fmt: skip


class _ChunkPretokenizer:
    """Pre-tokenizing by distinct space-separated chunks, for byte-level pre-tokenizers whose pre-tokens never
    hold a non-space character followed by a space (:data:`_SPACE_SAFE_SPLITS`, GPT-2's ByteLevel regex, with
    or without individual digits in front).

    Cut before every space that follows a non-space character, each such position is a pre-token boundary, and
    the pre-tokens between two of them are those of the piece alone (no match looks past it), so the text's
    pre-token counts are the sum, over distinct pieces, of the piece's pre-tokens times its count. A piece that
    is a space and stable letters (:func:`~analysis.core.unicode.stable_letter_run`) is one pre-token, one followed by a run of ASCII
    punctuation (:data:`_SUFFIX_PUNCT`) two, a space and such a run alone one; their byte-level forms come from
    one table decode for all of them (checked against the real pre-tokenizer when built). Any other piece goes
    through the real pre-tokenizer, once per distinct piece.
    """

    def __init__(self, pre: Any, prefix_space: bool) -> None:
        self.pre = pre
        self.prefix_space = prefix_space
        table = _byte_map()
        #: the byte → character table as a 256-character string, for codecs.charmap_decode
        self.decoding = "".join(table[b] for b in range(256))
        #: what a line break becomes: the separator of the batched decode (no rule-handled piece holds one)
        self.separator = table[ord("\n")]

    @classmethod
    def of(cls, tok: LoadedTokenizer) -> _ChunkPretokenizer | None:
        """The chunk pre-tokenizer for tok, or None when its pre-tokenizer is not one of the safe kinds."""
        pre = tok.pre_tokenizer or {}
        steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]
        steps = [s for s in steps or [] if not (s.get("type") == "Digits" and s.get("individual_digits"))]
        last = steps[-1] if steps else {}
        if last.get("type") != "ByteLevel" or tok.tokenizer.pre_tokenizer is None:
            return None
        if len(steps) == 1 and last.get("use_regex", True):
            ok = True
        else:
            split = steps[0] if len(steps) == 2 else {}
            ok = (
                not last.get("use_regex", True)
                and split.get("type") == "Split"
                and split.get("behavior") == "Isolated"
                and not split.get("invert")
                and (split.get("pattern") or {}).get("Regex") in _SPACE_SAFE_SPLITS
            )
        if not ok:
            return None
        out = cls(tok.tokenizer.pre_tokenizer, bool(last.get("add_prefix_space")))
        return out if out.check() else None

    def check(self) -> bool:
        """Whether the byte table and the piece rules agree with the real pre-tokenizer on a few pieces."""
        for piece in _CHECK_PIECES:
            ref = Counter(p for p, _ in self.pre.pre_tokenize_str(piece))
            as_lead: Counter = Counter()
            self.count_pieces(Counter([piece]), Counter(), as_lead)
            as_tail: Counter = Counter()
            if piece[:1] == " ":
                self.count_pieces(Counter(), Counter([piece[1:]]), as_tail)
            if as_lead != ref or (piece[:1] == " " and as_tail != ref):
                return False
        return True

    def count_pieces(self, lead: Counter, tail: Counter, into: Counter) -> None:
        """Add the pre-tokens of every distinct piece, times its count, to `into`: `lead` holds whole pieces,
        `tail` pieces without their one leading space."""
        simple: list[str] = []  # pieces (and punctuation runs) that are one pre-token each
        times: list[int] = []
        other: list[tuple[str, int]] = []  # through the real pre-tokenizer
        add, add_n = simple.append, times.append
        punct, letters = _SUFFIX_PUNCT, stable_letter_run().fullmatch
        for w, n in tail.items():
            if letters(w):
                add(" " + w)
                add_n(n)
                continue
            core = w.rstrip(punct)
            if len(core) != len(w):
                if core and letters(core):
                    add(" " + core)
                    add(w[len(core) :])
                    add_n(n)
                    add_n(n)
                    continue
                if not core:  # a space and ASCII punctuation: one pre-token
                    add(" " + w)
                    add_n(n)
                    continue
            other.append((" " + w, n))
        for piece, n in lead.items():
            word = piece[1:] if piece[:1] == " " else piece
            if letters(word) and (word is not piece or not self.prefix_space):
                add(piece)
                add_n(n)
            else:
                other.append((piece, n))
        get = into.get
        if simple:
            joined = "\n".join(simple).encode("utf-8", "surrogatepass")
            for p, n in zip(
                codecs.charmap_decode(joined, "strict", self.decoding)[0].split(self.separator), times
            ):
                into[p] = get(p, 0) + n
        first = itemgetter(0)
        pre_tokenize = self.pre.pre_tokenize_str
        for piece, n in other:
            for p in map(first, pre_tokenize(piece)):
                into[p] = get(p, 0) + n


_SP_CHUNK = re.compile(SPIECE_UNDERLINE + "*[^" + SPIECE_UNDERLINE + "]+|" + SPIECE_UNDERLINE + "+")


class PretokenCounter:
    """Pre-token counts (added tokens split out, normalizer, pre-tokenizer) over units added batch by batch.

    With `sp_chunks` (SentencePiece-style vocabularies, where no piece holds `▁` after another character), each
    pre-token is further cut before every `▁` run, which never changes the model's segmentation. With a
    space-safe byte-level pre-tokenizer (:class:`_ChunkPretokenizer`) the distinct space-separated pieces are
    counted first, over every batch, and pre-tokenized once each when the counts are taken (:meth:`take`).
    """

    def __init__(self, tok: LoadedTokenizer, *, sp_chunks: bool = False, nfkc: bool = False) -> None:
        tk = tok.tokenizer
        if tk.pre_tokenizer is None and not sp_chunks:
            raise UnsupportedTokenizerError(f"{tok.name}: continued training needs a pre-tokenizer")
        self.norm = tk.normalizer
        self.pre = tk.pre_tokenizer
        self.sp_chunks = sp_chunks
        self.nfkc = nfkc
        self.split = added_token_splitter(tok)
        self.by_piece = None if sp_chunks else _chunk_pretokenizer(tok)
        self.counts: Counter = Counter()
        self.lead: Counter = Counter()  # (by_piece) whole pieces
        self.tail: Counter = Counter()  # (by_piece) pieces after one space, without it
        self.units = 0
        self.chars = 0

    @property
    def size(self) -> int:
        """The distinct keys held (pieces and pre-tokens): what a corpus job's spill threshold bounds."""
        return len(self.counts) + len(self.lead) + len(self.tail)

    def add(self, units: Iterable[str]) -> None:
        """Count the pre-tokens of more text units (empty and whitespace-only units are skipped)."""
        counts, lead, tail = self.counts, self.lead, self.tail
        norm, pre, split, nfkc = self.norm, self.pre, self.split, self.nfkc
        chunk = _SP_CHUNK.findall
        first = itemgetter(0)
        by_piece = self.by_piece is not None
        pieces_of = _SPACE_CUT.split
        n_units = n_chars = 0
        for unit in units:
            if not unit or unit.isspace():
                continue
            n_units += 1
            n_chars += len(unit)
            if nfkc:
                unit = unicodedata.normalize("NFKC", unit)
            for part in split(unit):
                if norm is not None:
                    part = norm.normalize_str(part)
                if by_piece:
                    # the only whitespace is single spaces, none first: the pieces are the split's words, all
                    # but the first after one space (a trailing space is the piece " ")
                    if part.isprintable() and "  " not in part and part[:1] != " ":
                        words = part.split(" ")
                        lead[words[0]] += 1
                        tail.update(words[1:])
                    else:
                        lead.update(pieces_of(part))
                    continue
                pieces = list(map(first, pre.pre_tokenize_str(part))) if pre is not None else [part]
                if self.sp_chunks:
                    for p in pieces:
                        counts.update(chunk(p))
                else:
                    counts.update(pieces)
        self.units += n_units
        self.chars += n_chars

    def take(self) -> Counter:
        """The pre-token counts of the units added since the last take (the counter starts again empty)."""
        if self.by_piece is not None and (self.lead or self.tail):
            self.by_piece.count_pieces(self.lead, self.tail, self.counts)
        out = self.counts
        self.counts, self.lead, self.tail = Counter(), Counter(), Counter()
        return out


def count_pretokens(
    tok: LoadedTokenizer, units: Iterable[str], *, sp_chunks: bool = False, nfkc: bool = False
) -> tuple[Counter, int, int]:
    """(Counter of pre-token strings over the text, units, characters): a :class:`PretokenCounter` in one go.

    With `sp_chunks` (SentencePiece-style vocabularies, where no piece holds `▁` after another character),
    each pre-token is further cut before every `▁` run, which never changes the model's segmentation.
    """
    counter = PretokenCounter(tok, sp_chunks=sp_chunks, nfkc=nfkc)
    counter.add(units)
    return counter.take(), counter.units, counter.chars


@memoize(maxsize=4)
def _chunk_pretokenizer(tok: LoadedTokenizer) -> _ChunkPretokenizer | None:
    return _ChunkPretokenizer.of(tok)


@memoize(maxsize=2)
def _segmenter(tok: LoadedTokenizer) -> tuple[Callable[[str], list], np.ndarray]:
    """(the deterministic base model's `tokenize`, id → the vocabulary's own string as an object array), built once
    per tokenizer and process: a corpus job's reduce segments every bucket with the same model."""
    model = _deterministic_tokenizer(tok).model
    symbols = np.empty(max(tok.vocab.values(), default=-1) + 1, dtype=object)
    for t, i in tok.vocab.items():
        symbols[i] = t
    return model.tokenize, symbols


def vocabulary_symbols(tok: LoadedTokenizer) -> np.ndarray:
    """id → the model vocabulary's own string (an object array; None where no model token has the id)."""
    return _segmenter(tok)[1]


def segment_ids(tok: LoadedTokenizer, pretokens: Mapping[str, int]) -> Counter:
    """Word types as tuples of the base model's token ids (its current segmentation, `model.tokenize` in Rust)
    → frequency; :func:`words_from_ids` gives the strings."""
    tokenize = _segmenter(tok)[0]
    words: Counter = Counter()
    with no_cyclic_gc():  # a tuple per word type, no cycles
        for w, c in pretokens.items():
            words[tuple([t.id for t in tokenize(w)])] += c
    return words


def words_from_ids(tok: LoadedTokenizer, words: Mapping[tuple[int, ...], int]) -> Counter:
    """Word types keyed by tuples of ids → the same keyed by tuples of the vocabulary's own strings."""
    symbols = vocabulary_symbols(tok)
    keys = list(words)
    flat = np.fromiter(chain.from_iterable(keys), dtype=np.int64)
    it = iter(symbols[flat].tolist())
    out: Counter = Counter()
    with no_cyclic_gc():
        out.update(dict(zip([tuple(islice(it, n)) for n in map(len, keys)], words.values())))
    return out


def segment_words(tok: LoadedTokenizer, pretokens: Mapping[str, int]) -> Counter:
    """Word types keyed by the base model's current segmentation (`model.tokenize`, Rust) → frequency."""
    tokenize, symbols = _segmenter(tok)
    # the vocabulary's own string objects (a Token's `.value` is a new string per call: 1.5M copies on 10 MB)
    inv = symbols.tolist()
    words: Counter = Counter()
    with no_cyclic_gc():  # a tuple per word type, no cycles
        for w, c in pretokens.items():
            words[tuple([inv[t.id] for t in tokenize(w)])] += c
    return words
