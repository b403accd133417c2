"""R-BPE's target side (Hamdan, Al Mraikhat, Zaraket, EMNLP 2025): the target-script segments of a text
(:mod:`.segments`), the training texts of the target BPE (reusable characters dropped, FLORES, a corpus folder or a
wordfreq list), the target BPE itself (:func:`train_target_bpe`, or the parity-aware trainer) and the map of each
new token to an old id (:func:`build_id_maps`); the target-script segments themselves are :mod:`.segments`."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import tokenizers
from tokenizers.trainers import BpeTrainer

from analysis.bpe.parity import train_parity_bpe
from analysis.core import paths
from analysis.core.inputs import check_not_special
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.texts import flores
from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.document import bpe_model
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .classes import ReusePlan
from .segments import char_class, language_role, target_regex


def clean_texts(texts: Iterable[str], reusable_blocks: Iterable[str]) -> Iterator[str]:
    """Drop every sample that contains a character of a reusable block (step 3)."""
    bad = re.compile(char_class(reusable_blocks))
    for t in texts:
        if not bad.search(t):
            yield t


def wordfreq_texts(path: str | Path, scale: float = 1000.0, max_words: int | None = 200_000) -> Iterator[str]:
    """Lines of space-separated words from a `word<TAB>count` list, each word repeated ≈ count/scale times (≥ 1)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(check_not_special(path), "rt", encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            if max_words is not None and k >= max_words:
                break
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or not parts[0].strip():
                continue
            try:
                n = max(1, round(float(parts[1]) / scale))
            except ValueError:
                continue
            w = parts[0].strip()
            while n > 0:
                k2 = min(n, 64)
                yield " " + " ".join([w] * k2)
                n -= k2


def corpus_files(lang: str) -> list[Path]:
    """The shared corpora of one language (`$TOKLAB_ASSETS/corpora/text`: prose, UI strings, word frequencies)."""
    root = paths.shared_corpora() / "text"
    names = (f"{lang}.txt.gz", f"{lang}.ui.txt.gz", f"{lang}.wordfreq.tsv.gz")
    return [root / n for n in names if (root / n).is_file()]


def target_training_texts(
    lang: str = "arb_Arab",
    *,
    flores_train: bool = True,
    corpora: bool = True,
    max_words: int | None = 200_000,
    extra: Iterable[str] = (),
) -> list[str]:
    """Target-language training text: FLORES train split (:func:`analysis.texts.flores.split_lines`), the shared
    corpora (:func:`corpus_files`; a word-frequency list becomes lines of repeated words, at most `max_words`
    words) and `extra` lines (files, uploads), in that order."""
    texts: list[str] = []
    if flores_train:
        texts += flores.split_lines(lang)[0]
    if corpora:
        for p in corpus_files(lang):
            if p.name.endswith(".wordfreq.tsv.gz"):
                if max_words is None or max_words > 0:
                    texts += list(wordfreq_texts(p, max_words=max_words))
                continue
            with gzip.open(p, "rt", encoding="utf-8") as fh:
                texts += [ln.rstrip("\n") for ln in fh if ln.strip()]
    texts += [t for t in extra if t.strip()]
    if not texts:
        raise DataError(
            f"no training text for {lang}: choose FLORES lines, the shared corpora or your own text"
        )
    return texts


def check_supported(tok: LoadedTokenizer) -> None:
    """UnsupportedTokenizerError unless `tok` is a byte-level BPE tokenizer (what R-BPE reuses ids of)."""
    if tok.model_type != "BPE" or not tok.is_byte_level:
        raise UnsupportedTokenizerError(
            f"{tok.name}: R-BPE token reuse needs a byte-level BPE tokenizer (GPT-2/Llama-3/Qwen style); "
            f"this one is {tok.flavour}"
        )


#: Byte values that never occur in UTF-8 text (C0, C1, F5–FF): left out of the new tokenizer's alphabet, whose
#: training and encoding texts are always UTF-8, so no vocabulary slot (and no reused id) is spent on them.
NON_UTF8_BYTES = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])


def utf8_alphabet() -> list[str]:
    """The byte-level alphabet minus :data:`NON_UTF8_BYTES` (243 characters)."""
    return [BYTE_TO_CHAR[b] for b in range(256) if b not in NON_UTF8_BYTES]


def train_target_bpe(
    tok: LoadedTokenizer, segments: Iterable[str], vocab_size: int, *, min_frequency: int = 2
) -> tokenizers.Tokenizer:
    """Train the new byte-level BPE (old normalizer/pre-tokenizer/decoder, the UTF-8 byte alphabet, old specials)
    (step 4)."""
    check_supported(tok)
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": tok.normalizer,
        "pre_tokenizer": tok.pre_tokenizer,
        "post_processor": None,
        "decoder": tok.decoder,
        "model": bpe_model(),
    }
    new = tokenizers.Tokenizer.from_str(json.dumps(doc))
    specials = [a.content for a in sorted(tok.added_tokens, key=lambda a: a.id) if a.special]
    trainer = BpeTrainer(
        vocab_size=vocab_size + len(specials),
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=utf8_alphabet(),
        show_progress=False,
    )
    new.train_from_iterator(segments, trainer=trainer)
    return new


TRAINERS = ("bpe", "parity")


def train_parity_target(
    tok: LoadedTokenizer,
    plan: ReusePlan,
    segs: list[str],
    langs: Sequence[str] | None,
    train_lang: str | None,
    min_frequency: int,
) -> tuple[tokenizers.Tokenizer, list[str]]:
    """Parity-aware target tokenizer: one corpus per target-script FLORES language (the module docstring of :mod:`.reuse`)."""
    tre = target_regex(plan.target_blocks)
    if langs is None:
        langs = [
            c
            for c in flores.available_codes()
            if language_role(flores.split_lines(c)[0][:50], plan.target_blocks, plan.reusable_blocks)
            == "target"
        ]
    if not langs:
        raise DataError(
            "no FLORES language is written in the target script: parity-aware training needs some"
        )
    langs = list(dict.fromkeys(langs))
    if train_lang in langs:
        langs.remove(train_lang)
        langs.insert(0, train_lang)
    bad = re.compile(char_class(plan.reusable_blocks))

    def target_segments(lines: Sequence[str]) -> list[str]:
        return [m.group() for t in lines if not bad.search(t) for m in tre.finditer(t)]

    corpora, dev = [], []
    for k, code in enumerate(langs):
        first = flores.split_lines(code)[0]
        corpora.append((segs if k == 0 else []) + target_segments(first[:700]))
        dev.append(target_segments(first[700:]))
    specials = [a.content for a in sorted(tok.added_tokens, key=lambda a: a.id) if a.special]
    new = train_parity_bpe(
        corpora,
        plan.reusable_count + len(specials),
        dev=dev,
        template=tok,
        min_frequency=min_frequency,
        special_tokens=specials,
    )
    return new, list(langs)


def build_id_maps(
    tok: LoadedTokenizer, new: tokenizers.Tokenizer, reusable_ids: Sequence[int]
) -> tuple[dict[int, int], list[int]]:
    """new id → old id (same string → same id; new-only tokens, sorted, → free reusable ids, sorted) (step 5).

    Returns (new_to_old, reused old ids)."""
    old_ids = dict(tok.vocab)
    for a in tok.added_tokens:
        old_ids[a.content] = a.id
    common: dict[int, int] = {}
    new_only: list[int] = []
    for token, nid in sorted(new.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1]):
        if token in old_ids:
            common[nid] = old_ids[token]
        else:
            new_only.append(nid)
    taken = set(common.values())
    free = sorted(set(reusable_ids) - taken)
    if len(new_only) > len(free):
        raise DataError(f"{len(new_only)} new tokens but only {len(free)} reusable ids")
    new_to_old = dict(common)
    reused = free[: len(new_only)]
    new_to_old.update(zip(new_only, reused))
    return new_to_old, reused
