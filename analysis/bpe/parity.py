"""Parity-aware BPE training and its measurement against plain BPE on FLORES-200.

Parity-aware BPE (Foroutan, Meister, Paul, Niklaus, Ahmadi, Bosselut, Sennrich, "Parity-Aware Byte-Pair
Encoding: Improving Cross-lingual Fairness in Tokenization", arXiv 2508.04796, 2025) learns merges from one
corpus per language: at each step it takes the best merge *of the language that is currently compressed worst*
on a multi-parallel development set (the same sentences in every language), so token counts on parallel text
move towards parity. The pinned ``tokenizers`` (0.23.3) ships it as ``tokenizers.trainers.ParityBpeTrainer``
(variants ``base`` and ``window``; optional ``global_merges`` of plain BPE first; ``ratio`` targets instead of a
development set).

* :func:`train_parity_bpe` — the one helper every trainer in the app calls (R-BPE's target tokenizer, the
  comparison below, Extend and SA-BPE): per-language corpora (+ development sets) → a byte-level BPE with
  exactly `vocab_size` tokens (256 bytes + specials + merges), on a template's normalizer / pre-tokenizer /
  decoder or a GPT-2-style byte-level pipeline;
* :func:`train_plain_bpe` — plain BPE on the same pipeline and the union of the same corpora, equal size;
* :func:`parity_comparison` — both trained on the FLORES devtest lines ``[0, n_train)`` of every chosen
  language (the parity-aware trainer balances on lines ``[n_train, n_train + n_dev)``) and measured on the
  held-out lines from :data:`analysis.texts.flores.FLORES_TRAIN_LINES` on: per language the premium against English
  (Petrov et al. 2023, :func:`analysis.measure.grid.premium`) and bytes/token; overall the mean, maximum and Gini
  (:func:`analysis.measure.summaries.gini`) of the premiums, and the compression cost (bytes/token over all held-out
  text), as one :class:`ParityComparison` (``to_json()``: what `python -m analysis parity-train --json`
  prints and the Compression page offers). Results are cached on disk by parameters and FLORES data hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers
from tokenizers import decoders, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer, ParityBpeTrainer

from analysis.core.cache import DiskCache
from analysis.core.outputs import atomic_folder, atomic_write_text, json_document
from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.measure import fast_encode
from analysis.measure.grid import premium
from analysis.measure.summaries import gini
from analysis.texts import flores
from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.document import bpe_model
from analysis.tokenizer.tokenizer import LoadedTokenizer

VARIANTS = ("base", "window")
KINDS = ("plain", "parity")
_CACHE = DiskCache("parity", 1)
REPORT_FILE = "parity_report.json"
_ALPHABET = pre_tokenizers.ByteLevel.alphabet()


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------
def empty_tokenizer(template: LoadedTokenizer | None = None) -> tokenizers.Tokenizer:
    """An untrained byte-level BPE: the template's normalizer, pre-tokenizer and decoder (a byte-level template
    is required), or GPT-2's byte-level pre-tokenizer and decoder."""
    if template is None:
        tok = tokenizers.Tokenizer(BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        return tok
    if template.model_type != "BPE" or not template.is_byte_level:
        raise DataError(f"{template.name}: parity-aware training here needs a byte-level BPE template")
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": template.normalizer,
        "pre_tokenizer": template.pre_tokenizer,
        "post_processor": None,
        "decoder": template.decoder,
        "model": bpe_model(),
    }
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


#: The largest vocabulary trained here: far above what FLORES can fill (a larger number reaches the Rust trainer's
#: allocations and aborts the process).
MAX_VOCAB_SIZE = 1_000_000


def _merges_for(vocab_size: int, special_tokens: Sequence[str]) -> int:
    if vocab_size > MAX_VOCAB_SIZE:
        raise DataError(f"vocabulary size {vocab_size:,} is over the {MAX_VOCAB_SIZE:,} trained here")
    n = vocab_size - len(_ALPHABET) - len(special_tokens)
    if n < 0:
        raise DataError(
            f"vocabulary size {vocab_size} is below the {len(_ALPHABET)} bytes + {len(special_tokens)} special tokens"
        )
    return n


def train_parity_bpe(
    corpora: Sequence[Iterable[str]] | Mapping[str, Iterable[str]],
    vocab_size: int,
    *,
    dev: Sequence[Iterable[str]] | Mapping[str, Iterable[str]] | None = None,
    ratio: Sequence[float] | None = None,
    variant: str = "base",
    template: LoadedTokenizer | None = None,
    min_frequency: int = 0,
    special_tokens: Sequence[str] = (),
    global_merges: int = 0,
    window_size: int = 100,
    alpha: float = 2.0,
) -> tokenizers.Tokenizer:
    """Train a parity-aware byte-level BPE of `vocab_size` tokens (256 bytes + specials + merges).

    `corpora` holds one corpus per language (a mapping's values in its order); `dev` the matching parallel
    development sets (same order) or `ratio` target compression rates; with neither, the trainer follows the
    per-language training totals. `variant` is ``base`` or ``window`` (`window_size`, `alpha`);
    `global_merges` plain-BPE merges come first. The result has at most `vocab_size` tokens (fewer only when the
    corpora run out of pairs).
    """
    if variant not in VARIANTS:
        raise DataError(f"unknown parity-aware variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    train = list(corpora.values()) if isinstance(corpora, Mapping) else list(corpora)
    devs = None if dev is None else (list(dev.values()) if isinstance(dev, Mapping) else list(dev))
    if not train:
        raise DataError("parity-aware training needs at least one corpus")
    if devs is not None and len(devs) != len(train):
        raise DataError(f"{len(devs)} development sets for {len(train)} training corpora")
    if ratio is not None and len(ratio) != len(train):
        raise DataError(f"{len(ratio)} ratios for {len(train)} training corpora")
    tok = empty_tokenizer(template)
    trainer = ParityBpeTrainer(
        num_merges=_merges_for(vocab_size, special_tokens),
        variant=variant,
        min_frequency=min_frequency,
        global_merges=global_merges,
        window_size=window_size,
        alpha=alpha,
        special_tokens=list(special_tokens),
        initial_alphabet=_ALPHABET,
        show_progress=False,
    )
    trainer.train_from_iterator(
        tok,
        train_iterators=[iter(list(c)) for c in train],
        dev_iterators=None if devs is None else [iter(list(d)) for d in devs],
        ratio=None if ratio is None else [float(r) for r in ratio],
    )
    return tok


def train_plain_bpe(
    lines: Iterable[str],
    vocab_size: int,
    *,
    template: LoadedTokenizer | None = None,
    min_frequency: int = 0,
    special_tokens: Sequence[str] = (),
) -> tokenizers.Tokenizer:
    """Plain byte-level BPE on the same pipeline as :func:`train_parity_bpe`, `vocab_size` tokens.

    On GPT-2's pipeline (no template), with no special tokens and no `min_frequency`, gigatoken's trainer learns
    the merges (:func:`analysis.measure.fast_encode.train_bpe`): the same merges in the same order as the
    `tokenizers` BpeTrainer (bench/bench_bpe_train.py: all 7,744 merges of 204 FLORES languages × 700 lines at
    8,000 tokens identical, 4–7× faster on 2 busy cores) and the same tokenizer (tests/bpe/test_gigatoken_train.py);
    otherwise, or when gigatoken is missing or fails, the BpeTrainer."""
    _merges_for(vocab_size, special_tokens)
    if template is None and not min_frequency and not special_tokens:
        lines = list(lines)
        fast = _plain_bpe_by_gigatoken(lines, vocab_size)
        if fast is not None:
            return fast
    tok = empty_tokenizer(template)
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=_ALPHABET,
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    return tok


def _plain_bpe_by_gigatoken(lines: list[str], vocab_size: int) -> tokenizers.Tokenizer | None:
    """The BpeTrainer's tokenizer (GPT-2 pipeline, no specials) with gigatoken's merges: the 256 byte symbols in
    code-point order, then each merge's new token; None when gigatoken cannot train it here (or a merge repeats a
    token, which the BpeTrainer would count otherwise)."""
    merges, _why = fast_encode.train_bpe(lines, vocab_size)
    if not merges:
        return None
    vocab = {c: i for i, c in enumerate(sorted(_ALPHABET))}
    pairs = []
    for a, b in merges:
        left, right = "".join(BYTE_TO_CHAR[x] for x in a), "".join(BYTE_TO_CHAR[x] for x in b)
        if left + right in vocab or left not in vocab or right not in vocab:
            return None
        vocab[left + right] = len(vocab)
        pairs.append([left, right])
    tok = empty_tokenizer(None)
    doc = json.loads(tok.to_str())
    doc["model"] = {**doc["model"], "vocab": vocab, "merges": pairs}
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------
def sentence_tokens(tok: tokenizers.Tokenizer, lines: Sequence[str]) -> np.ndarray:
    """Tokens per line (no special tokens)."""
    return np.fromiter(
        (len(e.ids) for e in tok.encode_batch_fast(list(lines), add_special_tokens=False)),
        np.int64,
        len(lines),
    )


def measure(
    tok: tokenizers.Tokenizer, heldout: Mapping[str, Sequence[str]], reference: str = flores.ENGLISH
) -> list[dict[str, Any]]:
    """Per language: sentences, tokens, bytes, bytes/token, premium and Σ-ratio against the reference language
    (both None when the reference is missing or the line counts differ)."""
    counts = {lang: sentence_tokens(tok, lines) for lang, lines in heldout.items()}
    ref = counts.get(reference)
    rows = []
    for lang, lines in heldout.items():
        c = counts[lang]
        nbytes = sum(len(s.encode("utf-8")) for s in lines)
        parallel = ref is not None and ref.size == c.size and ref.sum() > 0
        rows.append(
            {
                "lang": lang,
                "sentences": int(c.size),
                "tokens": int(c.sum()),
                "bytes": nbytes,
                "bytes_per_token": nbytes / int(c.sum()) if c.sum() else None,
                "premium": premium(c, ref) if parallel else None,
                "parity_corpus": float(c.sum() / ref.sum()) if parallel else None,
            }
        )
    return rows


def summarize(rows: Sequence[dict[str, Any]], reference: str = flores.ENGLISH) -> dict[str, Any]:
    """Mean, median, maximum, standard deviation and Gini of the premiums (the reference language left out),
    and the compression over all languages (Σ bytes / Σ tokens, and the mean of per-language bytes/token)."""
    prem = np.asarray([r["premium"] for r in rows if r["premium"] is not None and r["lang"] != reference])
    tokens = sum(r["tokens"] for r in rows)
    nbytes = sum(r["bytes"] for r in rows)
    bpt = [r["bytes_per_token"] for r in rows if r["bytes_per_token"] is not None]
    worst = max((r for r in rows if r["premium"] is not None), key=lambda r: r["premium"], default=None)
    return {
        "languages": len(rows),
        "premium_mean": float(prem.mean()) if prem.size else None,
        "premium_median": float(np.median(prem)) if prem.size else None,
        "premium_max": float(prem.max()) if prem.size else None,
        "premium_max_lang": worst["lang"] if worst else None,
        "premium_std": float(prem.std()) if prem.size else None,
        "premium_gini": gini(prem.tolist()) if prem.size else None,
        "tokens": tokens,
        "bytes_per_token": nbytes / tokens if tokens else None,
        "bytes_per_token_mean": float(np.mean(bpt)) if bpt else None,
    }


# --------------------------------------------------------------------------------------------------
# The FLORES comparison
# --------------------------------------------------------------------------------------------------
def flores_splits(
    langs: Sequence[str], n_train: int, n_dev: int
) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    """Per language: training lines [0, n_train), development lines [n_train, n_train + n_dev) and the held-out
    lines from :data:`analysis.texts.flores.FLORES_TRAIN_LINES` on."""
    if n_train < 1 or n_dev < 1 or n_train + n_dev > flores.FLORES_TRAIN_LINES:
        raise DataError(
            f"training ({n_train}) and development ({n_dev}) lines must be ≥ 1 and fit in the first "
            f"{flores.FLORES_TRAIN_LINES} FLORES lines (the rest is held out)"
        )
    train, dev, held = {}, {}, {}
    counts = {}
    for lang in langs:
        counts[lang] = len(flores.lines(lang))
        if counts[lang] <= flores.FLORES_TRAIN_LINES:
            raise DataError(
                f"FLORES {lang} has {counts[lang]:,} lines: parity training reads lines 1–{n_train} to train, "
                f"{n_train + 1}–{n_train + n_dev} as development and {flores.FLORES_TRAIN_LINES + 1}– as held out, "
                "so it needs every FLORES-200 devtest line (1,012)"
            )
        first, rest = flores.split_lines(lang)
        train[lang], dev[lang], held[lang] = first[:n_train], first[n_train : n_train + n_dev], rest
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"{c} {n:,}" for c, n in counts.items())
        raise DataError(
            f"the FLORES languages have different numbers of lines ({shown}): the premium compares the same "
            "sentences line by line, so the files must be parallel"
        )
    return train, dev, held


def _cache_key(params: dict[str, Any], langs: Sequence[str]) -> str:
    data = flores.dataset()
    text = json.dumps(params, sort_keys=True) + "|" + ",".join(f"{c}:{data.data_hash(c)}" for c in langs)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@dataclass
class ParityComparison:
    """Parity-aware vs plain BPE at equal vocabulary size on FLORES (:func:`parity_comparison`)."""

    #: vocabulary size, lines, variant, reference, minimum frequency, global merges, tokenizers version, languages
    params: dict[str, Any]
    #: per kind: ``vocab_size``, training ``seconds``, ``summary`` (:func:`summarize`), per-language ``rows``
    plain: dict[str, Any]
    parity: dict[str, Any]
    #: parity-aware minus plain: premium mean/max/Gini/std and bytes/token, absolute and relative
    cost: dict[str, Any]
    #: the two trained tokenizers (``plain``, ``parity``) when kept; never cached, never in the JSON
    tokenizers: dict[str, tokenizers.Tokenizer] | None = None
    #: the folder :meth:`save` wrote
    out: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``params``, ``plain``, ``parity``, ``cost`` (and ``out`` once saved)."""
        doc: dict[str, Any] = {
            "params": self.params,
            "plain": self.plain,
            "parity": self.parity,
            "cost": self.cost,
        }
        if self.out is not None:
            doc["out"] = self.out
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ParityComparison:
        """The comparison a :meth:`to_json` document holds (the disk cache's form)."""
        return cls(doc["params"], doc["plain"], doc["parity"], doc["cost"])

    def save(self, folder: str | os.PathLike, *, replace: bool = False) -> str:
        """Write ``plain/tokenizer.json``, ``parity/tokenizer.json`` and :data:`REPORT_FILE` to a new folder,
        atomically; returns its absolute path (also kept in :attr:`out`)."""
        if not self.tokenizers:
            raise DataError("the trained tokenizers were not kept: compare again with keep_tokenizers=True")
        with atomic_folder(folder, replace=replace) as tmp:
            for kind, tok in self.tokenizers.items():
                (tmp / kind).mkdir()
                atomic_write_text(tmp / kind / "tokenizer.json", tok.to_str())
            atomic_write_text(tmp / REPORT_FILE, json_document(self.to_json()))
        self.out = str(Path(folder).resolve())
        return self.out


def parity_comparison(
    vocab_size: int,
    langs: str | Sequence[str] | None = "all",
    *,
    n_train: int = 700,
    n_dev: int = 100,
    variant: str = "base",
    reference: str = flores.ENGLISH,
    min_frequency: int = 0,
    global_merges: int = 0,
    use_cache: bool = True,
    keep_tokenizers: bool = False,
    progress: Progress | None = None,
) -> ParityComparison:
    """Parity-aware vs plain BPE at equal vocabulary size on FLORES (module docstring), as a
    :class:`ParityComparison`. With `keep_tokenizers` the two trained ``tokenizers.Tokenizer`` objects are kept
    (and the cache is not read)."""
    codes = flores.dataset().resolve_many(langs)
    reference = flores.dataset().resolve(reference)
    if reference not in codes:
        codes = [reference, *codes]
    params = {
        "vocab_size": int(vocab_size),
        "n_train": int(n_train),
        "n_dev": int(n_dev),
        "variant": variant,
        "reference": reference,
        "min_frequency": int(min_frequency),
        "global_merges": int(global_merges),
        "tokenizers": tokenizers.__version__,
    }
    if variant not in VARIANTS:
        raise DataError(f"unknown parity-aware variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    key = _cache_key(params, codes)
    if use_cache and not keep_tokenizers:
        hit = _CACHE.get(key)
        if hit is not None:
            report(progress, 1, 1, "from the cache")
            try:
                return ParityComparison.from_json(hit)
            except (KeyError, TypeError):  # a document of another shape: train again
                pass
    report(progress, 0, 4, f"reading FLORES ({len(codes)} languages)")
    train, dev, held = flores_splits(codes, n_train, n_dev)
    out: dict[str, Any] = {}
    trained: dict[str, tokenizers.Tokenizer] = {}
    for k, kind in enumerate(KINDS):
        report(progress, 1 + k, 4, f"training {kind} BPE ({vocab_size:,} tokens, {len(codes)} languages)")
        t0 = time.perf_counter()
        if kind == "plain":
            tok = train_plain_bpe(
                [s for c in codes for s in train[c]], vocab_size, min_frequency=min_frequency
            )
        else:
            tok = train_parity_bpe(
                train,
                vocab_size,
                dev=dev,
                variant=variant,
                min_frequency=min_frequency,
                global_merges=global_merges,
            )
        seconds = time.perf_counter() - t0
        rows = measure(tok, held, reference)
        out[kind] = {
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "seconds": seconds,
            "summary": summarize(rows, reference),
            "rows": rows,
        }
        trained[kind] = tok
    report(progress, 4, 4, "measured on held-out FLORES")
    res = ParityComparison(
        {**params, "languages": codes},
        out["plain"],
        out["parity"],
        _cost(out["plain"]["summary"], out["parity"]["summary"]),
    )
    if use_cache:
        _CACHE.put(key, res.to_json())
    if keep_tokenizers:
        res.tokenizers = trained
    return res


def _cost(plain: dict[str, Any], parity: dict[str, Any]) -> dict[str, Any]:
    """Parity-aware minus plain for the headline numbers (and the relative bytes/token change)."""
    out: dict[str, Any] = {}
    for k in (
        "premium_mean",
        "premium_max",
        "premium_gini",
        "premium_std",
        "bytes_per_token",
        "bytes_per_token_mean",
    ):
        a, b = plain.get(k), parity.get(k)
        out[k] = None if a is None or b is None else b - a
    a, b = plain.get("bytes_per_token"), parity.get("bytes_per_token")
    out["bytes_per_token_relative"] = None if not a or b is None else b / a - 1.0
    return out
