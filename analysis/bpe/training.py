"""Continued BPE training: learn N new merges on top of an existing tokenizer.

Purason, Chizhov, Yamshchikov & Fishel, *Teaching Old Tokenizers New Words: Efficient Tokenizer Adaptation for
Pre-trained Models* (arXiv 2512.03989, 2025), §3.1. Word collection goes through the tokenizer's own pipeline
in Rust:

* byte-level / pre-tokenized BPE (GPT-2, Llama-3, Qwen, Mistral-Nemo, SmolLM2): added/special tokens are split
  out, then `normalizer.normalize_str` → `pre_tokenizer.pre_tokenize_str` → `Counter` of pre-tokens → the
  base model's current segmentation `model.tokenize(word)` once per distinct pre-token;
* SentencePiece-style BPE (Llama-2, Mistral, Gemma): the full pipeline (`encode_batch`), and the token stream is
  cut into "words" wherever SentencePiece's trainer would never merge two neighbours (special and byte pieces,
  `▁` inside a piece, digits, a change of Unicode script, length > 16). Characters missing from the vocabulary
  are added first until the character coverage reaches 99.95 %.

The merges are learned by the one trainer core, :func:`analysis.bpe.trainer.learn`, with plain frequency
statistics: incremental BPE over word types, pair counts weighted by word frequency, an index pair → words, a
lazy max-heap so ties go to the lexicographically smallest pair (deterministic), optional maximum token length
and SentencePiece validity. One run of N new tokens yields every prefix 1..N.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from analysis.core.unicode import sentencepiece_script
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.tokenizer.alphabets import SPIECE_UNDERLINE
from analysis.tokenizer.tokenizer import LoadedTokenizer

from . import require_bpe
from .trainer import learn
from .words import _deterministic_tokenizer, segment_words
from .words import (
    added_token_splitter as added_token_splitter,  # re-exported: word collection lives in .words
)
from .words import count_pretokens as count_pretokens

#: SentencePiece TrainerSpec defaults used by the validity rules.
SP_MAX_PIECE_LENGTH = 16
#: Default character coverage for the SentencePiece "add missing characters first" step.
SP_CHARACTER_COVERAGE = 0.9995
_SP_SPECIALS = frozenset({"<unk>", "<s>", "</s>", "<pad>", "<mask>"})
_ENCODE_BATCH = 2000


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One learned vocabulary step: a merge `pair` → `token`, or an added character (`pair` is None)."""

    token: str
    pair: tuple[str, str] | None
    freq: int
    new: bool


@dataclass
class TrainingResult:
    """The outcome of one continued-training run; every prefix of 1..n_new new tokens can be cut from it."""

    base_name: str
    base_hash: str
    mode: str
    steps: list[Step]
    n_requested: int
    word_types: int = 0
    units: int = 0
    chars: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def n_new(self) -> int:
        """How many new tokens the run produced (can be < n_requested on a small corpus)."""
        return sum(1 for s in self.steps if s.new)

    @property
    def char_steps(self) -> list[Step]:
        """The characters added for coverage (SentencePiece mode)."""
        return [s for s in self.steps if s.pair is None]

    def prefix(self, n: int | None = None) -> list[Step]:
        """The steps up to and including the n-th new token (all steps if n is None)."""
        if n is None:
            return list(self.steps)
        out: list[Step] = []
        k = 0
        for s in self.steps:
            if k >= n:
                break
            out.append(s)
            if s.new:
                k += 1
        return out

    def new_tokens(self, n: int | None = None) -> list[str]:
        """The new vocabulary strings of the first n new tokens, in learned order."""
        return [s.token for s in self.prefix(n) if s.new]

    def merges(self, n: int | None = None) -> list[tuple[str, str]]:
        """The learned merges of the prefix, in order (a merge may produce an already-known token)."""
        return [s.pair for s in self.prefix(n) if s.pair is not None]

    def to_json(self) -> dict:
        """A JSON-serialisable summary (without the full step list)."""
        return {
            "base": self.base_name,
            "mode": self.mode,
            "n_requested": self.n_requested,
            "n_new": self.n_new,
            "merges": sum(1 for s in self.steps if s.pair is not None),
            "characters_added": len(self.char_steps),
            "word_types": self.word_types,
            "units": self.units,
            "chars": self.chars,
            "seconds": self.seconds,
        }


# --------------------------------------------------------------------------------------------------
# SentencePiece validity rules; scripts from analysis.core.unicode with SentencePiece's Han rule
# --------------------------------------------------------------------------------------------------
def _is_digit(ch: str) -> bool:
    return unicodedata.category(ch) == "Nd"


@lru_cache(maxsize=1 << 20)
def sp_piece_valid(
    piece: str,
    max_length: int = SP_MAX_PIECE_LENGTH,
    split_digits: bool = True,
    split_by_script: bool = True,
    split_by_number: bool = True,
    allow_whitespace_only: bool = True,
) -> bool:
    """Whether SentencePiece's BPE trainer would accept `piece` (TrainerSpec defaults, `▁` as prefix)."""
    if not piece or len(piece) > max_length:
        return False
    all_ws = all(c == SPIECE_UNDERLINE for c in piece)
    prev = None
    for pos, c in enumerate(piece):
        if c in ("\x00", " ", "\u2047"):
            return False
        if c == SPIECE_UNDERLINE:
            if not (allow_whitespace_only and all_ws) and pos > 0:
                return False
            continue
        s = sentencepiece_script(c)
        if s == "Inherited":
            s = prev
        if not split_by_number and _is_digit(c):
            s = None
        if split_digits and _is_digit(c) and len(piece) > 1:
            return False
        if split_by_script and s is not None and prev is not None and s != prev:
            return False
        prev = s
    return True


# --------------------------------------------------------------------------------------------------
# Word collection
# --------------------------------------------------------------------------------------------------
def training_mode(tok: LoadedTokenizer) -> str:
    """`byte-level`, `sentencepiece` or `pretokenized`: how continued training collects words for tok."""
    hint = "use the WordPiece extension method instead" if tok.model_type == "WordPiece" else ""
    require_bpe(tok, "continued BPE training", hint=hint)
    if tok.continuing_subword_prefix or tok.end_of_word_suffix:
        raise UnsupportedTokenizerError(
            f"{tok.name}: BPE with a continuing-subword prefix or end-of-word suffix is not supported"
        )
    if tok.is_byte_level:
        return "byte-level"
    if tok.is_sentencepiece_style or tok.byte_fallback:
        return "sentencepiece"
    if tok.pre_tokenizer is None:
        raise UnsupportedTokenizerError(
            f"{tok.name}: a BPE tokenizer without a pre-tokenizer is not supported"
        )
    return "pretokenized"


def _sp_pair_valid_factory(tok: LoadedTokenizer) -> Callable[[str, str], bool]:
    frozen = {a.content for a in tok.added_tokens} | _SP_SPECIALS
    if tok.unk_token:
        frozen.add(tok.unk_token)
    cache: dict[tuple[str, str], bool] = {}

    def valid(a: str, b: str) -> bool:
        key = (a, b)
        r = cache.get(key)
        if r is None:
            r = (
                a not in frozen
                and b not in frozen
                and not tok.is_byte_piece(a)
                and not tok.is_byte_piece(b)
                and sp_piece_valid(a + b)
            )
            cache[key] = r
        return r

    return valid


def sp_groups(tok: LoadedTokenizer, words: Counter) -> Counter:
    """Cut segmented words into groups at every neighbour pair SentencePiece's trainer could never merge."""
    valid = _sp_pair_valid_factory(tok)
    out: Counter = Counter()
    for w, c in words.items():
        group: list[str] = []
        prev = None
        for t in w:
            if prev is not None and valid(prev, t):
                group.append(t)
            else:
                if len(group) > 1:
                    out[tuple(group)] += c
                group = [t]
            prev = t
        if len(group) > 1:
            out[tuple(group)] += c
    return out


def _sp_chunkable(tok: LoadedTokenizer) -> bool:
    rx = re.compile("[^" + SPIECE_UNDERLINE + "]" + SPIECE_UNDERLINE)
    return not any(rx.search(s) for s in tok.vocab)


def collect_sentencepiece_words(
    tok: LoadedTokenizer, units: Iterable[str], nfkc: bool = True
) -> tuple[Counter, int, int]:
    """SentencePiece mode: word groups of the current segmentation, cut where SentencePiece never merges."""
    if _sp_chunkable(tok):
        pre, n_units, n_chars = count_pretokens(tok, units, sp_chunks=True, nfkc=nfkc)
        return sp_groups(tok, segment_words(tok, pre)), n_units, n_chars
    # general path: whole units through the full pipeline (slower)
    tk = _deterministic_tokenizer(tok)
    words: Counter = Counter()
    n_units = n_chars = 0
    batch: list[str] = []

    def flush() -> None:
        for enc in tk.encode_batch(batch, add_special_tokens=False):
            words[tuple(enc.tokens)] += 1
        batch.clear()

    for unit in units:
        if not unit or unit.isspace():
            continue
        n_units += 1
        n_chars += len(unit)
        batch.append(unicodedata.normalize("NFKC", unit) if nfkc else unit)
        if len(batch) >= _ENCODE_BATCH:
            flush()
    if batch:
        flush()
    return sp_groups(tok, words), n_units, n_chars


def char_counts(units: Iterable[str], nfkc: bool = True) -> Counter:
    """Characters of the text units (NFKC first with `nfkc`): the histogram the coverage step selects from."""
    counts: Counter = Counter()
    for unit in units:
        counts.update(unicodedata.normalize("NFKC", unit) if nfkc else unit)
    return counts


def coverage_characters(
    tok: LoadedTokenizer, histogram: Mapping[str, int], coverage: float = SP_CHARACTER_COVERAGE
) -> list[tuple[str, int]]:
    """Most frequent characters of a histogram missing from the vocab, until `coverage` of the text is covered.

    Spaces count as ``▁``; other whitespace, control, format and surrogate characters are left out. Ties go to
    the smaller character.
    """
    counts = Counter(histogram)
    if " " in counts:
        counts[SPIECE_UNDERLINE] += counts.pop(" ")
    for ch in list(counts):
        if ch != SPIECE_UNDERLINE and (ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Cs")):
            del counts[ch]
    total = sum(counts.values())
    if not total:
        return []
    vocab = tok.vocab
    covered = sum(c for ch, c in counts.items() if ch in vocab)
    missing = sorted(((ch, c) for ch, c in counts.items() if ch not in vocab), key=lambda x: (-x[1], x[0]))
    out = []
    for ch, c in missing:
        if covered / total >= coverage:
            break
        out.append((ch, c))
        covered += c
    return out


def missing_characters(
    tok: LoadedTokenizer, units: Iterable[str], coverage: float = SP_CHARACTER_COVERAGE, nfkc: bool = True
) -> list[tuple[str, int]]:
    """Most frequent characters missing from the vocab, added until `coverage` of the text is covered."""
    return coverage_characters(tok, char_counts(units, nfkc), coverage)


# --------------------------------------------------------------------------------------------------
# The trainer (the one core in analysis.bpe.trainer, plain frequency statistics)
# --------------------------------------------------------------------------------------------------
def train_merges(
    words: Counter,
    n_new: int,
    known: Callable[[str], bool],
    *,
    max_token_length: int | None = None,
    is_valid: Callable[[str], bool] | None = None,
    min_frequency: int = 0,
) -> list[Step]:
    """Learn merges over word types until `n_new` tokens unknown to `known` were created (or pairs run out, or
    the best pair is rarer than `min_frequency`).

    `words` maps a tuple of current symbols to its frequency. Deterministic: the most frequent pair wins,
    ties go to the lexicographically smallest (left, right) pair (:func:`analysis.bpe.trainer.learn`).
    """
    run = learn(
        words.items(),
        n_new,
        known=known,
        valid=is_valid,
        max_token_length=max_token_length,
        min_frequency=min_frequency,
    )
    return [Step(p.token, (p.left, p.right), p.freq, p.new) for p in run.pops]


# --------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------
def _as_reiterable(units: Iterable[str] | Callable[[], Iterable[str]]) -> Callable[[], Iterator[str]]:
    if callable(units) and not hasattr(units, "__iter__"):
        return lambda: iter(units())  # type: ignore[operator]
    if isinstance(units, Iterator):  # one-shot generator: keep it in memory for the second pass
        kept = list(units)
        return lambda: iter(kept)
    return lambda: iter(units)  # type: ignore[arg-type]


def with_characters(tok: LoadedTokenizer, chars: list[str]) -> LoadedTokenizer:
    """A copy of tok with single characters appended to the model vocab (ids after every existing id)."""
    if not chars:
        return tok
    doc = tok.document()
    vocab = doc["model"]["vocab"]
    used = set(vocab.values())
    for a in tok.added_tokens:  # keep added-token ids (tokenizers numbers outside ones from the vocab size)
        if a.content not in vocab and a.id not in used:
            vocab[a.content] = a.id
            used.add(a.id)
    next_id = max(list(vocab.values()) + [a.id for a in tok.added_tokens]) + 1
    for ch in chars:
        if ch not in vocab:
            vocab[ch] = next_id
            next_id += 1
    return LoadedTokenizer.from_document(doc, name=tok.name, source=tok.source, config=tok.config)


def continue_training(
    tok: LoadedTokenizer,
    units: Iterable[str] | Callable[[], Iterable[str]],
    n_new: int,
    *,
    max_token_length: int | None = None,
    coverage: float | None = SP_CHARACTER_COVERAGE,
    nfkc: bool = True,
    min_frequency: int = 0,
) -> TrainingResult:
    """Continue BPE training of `tok` on text until `n_new` new tokens exist (or no pair reaches
    `min_frequency`); the result holds every prefix.

    Two halves: :func:`collect_training_words` counts the words (in this process; the corpus executor of
    :mod:`analysis.jobs` counts them shard by shard instead), :func:`train_from_counts` learns the merges.

    `units` is an iterable of text units (re-iterable, e.g. a :class:`analysis.texts.corpora.Corpus`, if the
    SentencePiece coverage step needs a second pass). `coverage` (SentencePiece mode) adds the most frequent
    missing characters first until that share of characters is in the vocabulary (None = skip);
    `nfkc` NFKC-normalises the text in SentencePiece mode, as SentencePiece training does.
    """
    if n_new <= 0:
        raise DataError("the number of new tokens must be positive")
    t0 = time.perf_counter()
    counted = collect_training_words(tok, units, n_new, coverage=coverage, nfkc=nfkc)
    return train_from_counts(
        tok, counted, n_new, max_token_length=max_token_length, min_frequency=min_frequency, t0=t0
    )


@dataclass
class TrainingWords:
    """The continued-training input: word types (tuples of current tokens) → frequency, with the corpus size.

    `characters` are the SentencePiece-mode coverage characters (most frequent first, at most n_new) that the
    words were segmented with; empty in byte-level and pre-tokenized modes. `seconds` are the counting phases.
    """

    mode: str
    words: Counter
    units: int
    chars: int
    characters: list[tuple[str, int]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def collect_training_words(
    tok: LoadedTokenizer,
    units: Iterable[str] | Callable[[], Iterable[str]],
    n_new: int,
    *,
    coverage: float | None = SP_CHARACTER_COVERAGE,
    nfkc: bool = True,
) -> TrainingWords:
    """The first half of :func:`continue_training`: the coverage characters (SentencePiece mode) and the words."""
    mode = training_mode(tok)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    chars_added: list[tuple[str, int]] = []
    if mode == "sentencepiece":
        get = _as_reiterable(units)
        work = tok
        if coverage:
            chars_added = missing_characters(tok, get(), coverage, nfkc=nfkc)[:n_new]
            work = with_characters(tok, [ch for ch, _ in chars_added])
            timings["coverage"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        words, n_units, n_chars = collect_sentencepiece_words(work, get(), nfkc=nfkc)
        timings["collect"] = time.perf_counter() - t1
    else:
        src = units() if callable(units) and not hasattr(units, "__iter__") else units
        pre, n_units, n_chars = count_pretokens(tok, src)
        timings["pretokenize"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        words = segment_words(tok, pre)
        timings["segment"] = time.perf_counter() - t1
    return TrainingWords(mode, words, n_units, n_chars, chars_added, timings)


def train_from_counts(
    tok: LoadedTokenizer,
    counted: TrainingWords,
    n_new: int,
    *,
    max_token_length: int | None = None,
    min_frequency: int = 0,
    t0: float | None = None,
) -> TrainingResult:
    """The second half of :func:`continue_training`: merges learned from counted words (however they were
    counted: in this process or by the corpus executor), after the coverage characters.

    `t0` (a `time.perf_counter()` value) is when the whole run started, for the total time.
    """
    if n_new <= 0:
        raise DataError("the number of new tokens must be positive")
    if counted.mode != training_mode(tok):
        raise DataError(f"the words were counted in {counted.mode} mode, not for {tok.name}")
    if counted.chars == 0 or not counted.words:
        raise DataError("the training text is empty (or too short to learn any merge)")
    t0 = time.perf_counter() if t0 is None else t0
    timings = dict(counted.seconds)
    steps = [Step(ch, None, c, True) for ch, c in counted.characters]
    known = set(tok.vocab) | {a.content for a in tok.added_tokens} | {ch for ch, _ in counted.characters}
    t2 = time.perf_counter()
    steps += train_merges(
        counted.words,
        n_new - len(steps),
        known.__contains__,
        max_token_length=max_token_length,
        is_valid=sp_piece_valid if counted.mode == "sentencepiece" else None,
        min_frequency=min_frequency,
    )
    timings["train"] = time.perf_counter() - t2
    if not any(s.new for s in steps):
        raise DataError("the training text is too short: no new token could be learned from it")
    timings["total"] = time.perf_counter() - t0
    return TrainingResult(
        base_name=tok.name,
        base_hash=tok.content_hash,
        mode=counted.mode,
        steps=steps,
        n_requested=n_new,
        word_types=len(counted.words),
        units=counted.units,
        chars=counted.chars,
        seconds=timings,
    )
