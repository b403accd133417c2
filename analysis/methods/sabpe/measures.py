"""SA-BPE's measures (Chizhov, Bogomolov & Yamshchikov, ACL 2026, §4.3, §5.2, App. D and G): three-digit numbers,
identifier name parts, per-language compression and its Gini, coverage, single-repository tokens."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.bpe import unreachable_ids
from analysis.errors import DataError
from analysis.measure.corpus_counts import encode_ids, text_counts
from analysis.measure.summaries import gini
from analysis.texts.code import CodeRecord
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .sabpe import CONCENTRATION_THRESHOLD, SABPEResult

# --------------------------------------------------------------------------------------------------
# Evaluation (paper §4.3, §5.2, App. D and G)
# --------------------------------------------------------------------------------------------------
#: The paper's Gini index over per-language compression rates (18 languages, vocabulary 32,768): Table 9 gives
#: it for BPE; the other values are :func:`analysis.measure.summaries.gini` of the per-language rates in Tables 10–11.
PAPER_LANGUAGE_GINI = (
    {"priority": "F", "skip": "no skipping", "gini": 0.0576, "source": "Table 9"},
    {"priority": "F", "skip": "no skipping", "gini": 0.0578, "source": "Tables 10–11"},
    {"priority": "F*L", "skip": "no skipping", "gini": 0.0572, "source": "Tables 10–11"},
    {"priority": "F*log(R)", "skip": "no skipping", "gini": 0.0580, "source": "Tables 10–11"},
    {"priority": "F*log(R)*L", "skip": "no skipping", "gini": 0.0575, "source": "Tables 10–11"},
)
#: Three-digit numbers a vocabulary can hold as single tokens (100–999; the paper's "900 in the best case").
THREE_DIGIT_MAX = 900
_THREE_DIGITS = re.compile(r"[1-9][0-9]{2}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")
#: Name parts at and above which a compound identifier token counts as long (the paper: "no longer than five").
LONG_NAME_PARTS = 5


def _token_text(tok: LoadedTokenizer, t: str) -> str | None:
    """A vocabulary token as text without its leading space (None when its bytes are not whole UTF-8)."""
    try:
        text = tok.token_bytes(t).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[1:] if text.startswith(" ") else text


def three_digit_numbers(tok: LoadedTokenizer) -> int:
    """How many of the numbers 100–999 are single vocabulary tokens (with or without a leading space)."""
    found = set()
    for t in tok.vocab:
        text = _token_text(tok, t)
        if text is not None and _THREE_DIGITS.fullmatch(text):
            found.add(text)
    return len(found)


def name_parts(text: str) -> int:
    """Name parts of a CamelCase or snake_case identifier (snake_case split at underscores, CamelCase at capitals,
    a run of capitals being one abbreviation: ``getHTTPStatus`` → 3); 0 for anything else or a single part."""
    text = text[1:] if text.startswith(" ") else text
    if not _IDENTIFIER.fullmatch(text):
        return 0
    chunks = [c for c in text.split("_") if c]
    if len(chunks) < 2 and not _CAMEL.search(text):
        return 0
    n = sum(len(_NAME_PART.findall(c)) for c in chunks)
    return n if n >= 2 else 0


def identifier_lengths(tok: LoadedTokenizer) -> dict[str, Any]:
    """CamelCase / snake_case tokens of the vocabulary by their length in name parts (paper Fig. 3)."""
    hist: Counter = Counter()
    longest: list[tuple[int, str]] = []
    for t in tok.vocab:
        text = _token_text(tok, t)
        n = name_parts(text) if text else 0
        if n:
            hist[n] += 1
            longest.append((n, text))
    longest.sort(key=lambda x: (-x[0], x[1]))
    total = sum(hist.values())
    return {
        "tokens": total,
        "by_parts": {str(k): hist[k] for k in sorted(hist)},
        "mean_parts": sum(k * v for k, v in hist.items()) / total if total else 0.0,
        "max_parts": max(hist, default=0),
        f"at_least_{LONG_NAME_PARTS}_parts": sum(v for k, v in hist.items() if k >= LONG_NAME_PARTS),
        "longest": [text for _, text in longest[:10]],
    }


def _texts_and_languages(heldout: Sequence[str] | Sequence[CodeRecord]) -> tuple[list[str], list[str] | None]:
    texts, langs = [], []
    for h in heldout:
        if isinstance(h, CodeRecord):
            if h.text:
                texts.append(h.text)
                langs.append(h.language)
        elif h:
            texts.append(h)
            langs.append("")
    return texts, (langs if any(langs) else None)


def language_compression(
    flat: np.ndarray, lens: np.ndarray, texts: Sequence[str], langs: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per language: files, bytes, tokens, compression (bytes/token) and coverage (distinct tokens used)."""
    ends = np.cumsum(lens)
    starts = ends - lens
    nbytes = text_counts(texts)["bytes"]
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted(set(langs)):
        idx = [i for i, g in enumerate(langs) if g == lang]
        ids = np.concatenate([flat[starts[i] : ends[i]] for i in idx]) if idx else np.zeros(0, np.int64)
        b = int(nbytes[idx].sum())
        out[lang] = {
            "files": len(idx),
            "bytes": b,
            "tokens": int(ids.size),
            "bytes_per_token": b / ids.size if ids.size else float("nan"),
            "coverage": int(np.unique(ids).size),
        }
    return out


def tokenizer_metrics(tok: LoadedTokenizer, heldout: Sequence[str] | Sequence[CodeRecord]) -> dict[str, Any]:
    """Held-out measures of any byte-level code tokenizer (paper §4.3 and §5.2).

    Compression (bytes/token), coverage (vocabulary tokens used), the Gini index of the token frequencies,
    vocabulary mean token length, STT-unreachable tokens, three-digit numbers as tokens and CamelCase /
    snake_case token lengths; with source-attributed records also, per language, compression and coverage, and
    the paper's Gini index over the per-language compression rates (App. D, Table 9).
    """
    texts, langs = _texts_and_languages(heldout)
    if not texts:
        raise DataError("no held-out text to evaluate on")
    flat, lens = encode_ids(tok, texts)
    n_model = len(tok.vocab)
    freq = np.bincount(flat, minlength=tok.vocab_size + 1)
    n_tok = int(flat.size)
    n_bytes = int(text_counts(texts)["bytes"].sum())
    lens_b = [len(tok.token_bytes(t)) for t in tok.vocab]
    out: dict[str, Any] = {
        "tokenizer": tok.name,
        "vocab_size": tok.vocab_size,
        "bytes_per_token": n_bytes / n_tok if n_tok else float("nan"),
        "heldout_tokens": n_tok,
        "coverage": int((freq[:n_model] > 0).sum()),
        "token_frequency_gini": gini(freq[:n_model].tolist()),
        "mean_token_length": float(np.mean(lens_b)),
        "three_digit_numbers": three_digit_numbers(tok),
        "identifiers": identifier_lengths(tok),
        "stt_unreachable": len(unreachable_ids(tok)),
    }
    if langs is not None:
        per = language_compression(flat, lens, texts, langs)
        out["languages"] = per
        out["language_compression_gini"] = gini([v["bytes_per_token"] for v in per.values()])
    return out


def evaluate(
    result: SABPEResult,
    heldout: Sequence[str] | Sequence[CodeRecord],
    threshold: float = CONCENTRATION_THRESHOLD,
) -> dict[str, Any]:
    """:func:`tokenizer_metrics` of a trained run plus its source statistics: single-repository tokens and merges,
    skipped pairs, learned tokens unused in training, training time."""
    out = tokenizer_metrics(result.tokenizer, heldout)
    learned = result.token_sources
    used = [v for v in learned.values() if v[0] > 0]
    single = sum(1 for n, top, _, _ in used if top / n >= threshold)
    out.update(
        priority=result.priority,
        skip=result.skip.label(),
        learned_tokens=len(learned),
        single_repo_tokens=single,
        single_repo_share=single / len(used) if used else 0.0,
        unused_in_training=len(learned) - len(used),
        single_repo_merges=sum(1 for h in result.history if not h.skipped and h.repos == 1),
        skipped=result.n_skipped,
        train_seconds=result.seconds.get("train", 0.0),
    )
    return out
