"""Source-attributed BPE (SA-BPE): Chizhov, Bogomolov & Yamshchikov, *From Where Words Come: Efficient
Regularization of Code Tokenizers Through Source Attribution* (ACL 2026).

A byte-level BPE tokenizer trained **from scratch** on source-attributed code (records with `repo` and
`language`), reusing a base tokenizer's normalizer + pre-tokenizer (GPT-2, Qwen3, Llama-3 …). Every word type
carries per-repository and per-language counts; every candidate pair keeps

* F — its frequency (weighted by word frequency, as in plain BPE),
* R — the number of distinct repositories it occurs in, L — the number of distinct languages,

maintained incrementally by the one trainer core (:mod:`analysis.bpe.trainer`, its source-attributed pair
statistics): a merge only touches the words that hold the merged pair, and for each pair whose occurrences
change in such a word the word's repository/language counts are added or subtracted.

Merge **priority** (paper §4.1): ``F`` (plain BPE), ``F*L``, ``F*log(R+1)``, ``F*log(R)`` (nullifies
single-repository pairs), ``F*log(R+1)*L`` and ``F*log(R)*L`` (the paper's recommended multilingual default).
The queue is a lazy max-heap keyed (−priority, −F, left, right): ties go to the more frequent, then the
lexicographically smallest pair, so ``F`` without skipping reproduces :func:`analysis.bpe.training.train_merges`.

Merge **skipping** (paper §4.1 "merge skip criterion", as we read it): a pair chosen by the priority is never
merged if R < ``min_repos`` (the paper's R_t; it tried 2, 5, 10, 20), L < ``min_languages`` (L_t; it used 4,
and "skip L = 1" = 2), or — our addition, as a parameter — its top repository holds more than ``max_share`` of
F. Because R and L never grow along a merge tree, a skipped pair is banned for good. Defaults are off (1, 1,
None): the paper finds the parameter-free priorities a good default and the thresholds need tuning.

Inference is plain BPE: the result is an ordinary Hugging Face ``tokenizer.json`` (256-symbol byte alphabet,
learned merges in order, the base's pre-tokenizer and decoder), so `tokenizers` encodes with it as is.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.bpe import unreachable_ids
from analysis.bpe.parity import train_parity_bpe
from analysis.bpe.trainer import (
    DEFAULT_PRIORITY,
    PRIORITIES,
    PRIORITY_HELP,
    SkipRule,
    SourceStats,
    learn,
    normalize_priority,
    priority_function,
)
from analysis.bpe.training import added_token_splitter
from analysis.core.progress import Progress
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.measure.metrics import encode_ids, gini, text_counts
from analysis.texts.code import CodeRecord
from analysis.tokenizer.tokenizer import BYTE_TO_CHAR, LoadedTokenizer, bpe_model

__all__ = [  # the priorities and the skip rule live with the trainer core; SA-BPE's API names them here too
    "ALPHABET",
    "CONCENTRATION_THRESHOLD",
    "DEFAULT_PRIORITY",
    "DEFAULT_SPECIALS",
    "PRIORITIES",
    "PRIORITY_HELP",
    "PAPER_LANGUAGE_GINI",
    "RUN_LABELS",
    "MergeRecord",
    "SABPEResult",
    "SabpeComparison",
    "SkipRule",
    "SourceWords",
    "TrainState",
    "build_tokenizer",
    "collect_words",
    "evaluate",
    "identifier_lengths",
    "language_compression",
    "name_parts",
    "normalize_priority",
    "priority_function",
    "records_by_language",
    "require_byte_level",
    "three_digit_numbers",
    "tokenizer_metrics",
    "train",
    "train_parity_baseline",
    "train_source_bpe",
]

#: Share of a token's training occurrences from one repository above which it counts as single-repository.
CONCENTRATION_THRESHOLD = 0.9
DEFAULT_SPECIALS = ("<|endoftext|>",)
ALPHABET = [BYTE_TO_CHAR[b] for b in range(256)]


# --------------------------------------------------------------------------------------------------
# Word types with per-source counts
# --------------------------------------------------------------------------------------------------
@dataclass
class SourceWords:
    """Pre-token types with total frequency and per-repository / per-language counts."""

    words: list[str]
    freqs: list[int]
    repo_dist: list[tuple[tuple[int, ...], tuple[int, ...]]]
    lang_dist: list[tuple[tuple[int, ...], tuple[int, ...]]]
    repos: list[str]
    languages: list[str]
    n_records: int
    n_bytes: int

    def counter(self) -> Counter:
        """Word types as tuples of initial byte-level symbols → frequency (the plain-BPE view)."""
        return Counter({tuple(w): f for w, f in zip(self.words, self.freqs)})


def require_byte_level(base: LoadedTokenizer) -> None:
    """Raise unless base has a byte-level pre-tokenizer (from-scratch training needs its 256-symbol alphabet)."""
    if not base.is_byte_level or base.tokenizer.pre_tokenizer is None:
        raise UnsupportedTokenizerError(
            f"{base.name}: SA-BPE trains a byte-level BPE from scratch and needs a byte-level pre-tokenizer "
            "(GPT-2, Qwen, Llama-3 …)"
        )


def collect_words(base: LoadedTokenizer, records: Sequence[CodeRecord]) -> SourceWords:
    """Pre-tokenize every record with base's normalizer + pre-tokenizer (Rust) and count words per source."""
    require_byte_level(base)
    tk = base.tokenizer
    norm, pre = tk.normalizer, tk.pre_tokenizer
    split = added_token_splitter(base)
    repo_ix: dict[str, int] = {}
    lang_ix: dict[str, int] = {}
    by_repo: dict[str, dict[int, int]] = {}
    by_lang: dict[str, dict[int, int]] = {}
    n_bytes = 0
    for rec in records:
        r = repo_ix.setdefault(rec.repo, len(repo_ix))
        g = lang_ix.setdefault(rec.language, len(lang_ix))
        n_bytes += len(rec.text.encode("utf-8"))
        cnt: Counter = Counter()
        for part in split(rec.text):
            if norm is not None:
                part = norm.normalize_str(part)
            cnt.update(p for p, _ in pre.pre_tokenize_str(part))
        for w, c in cnt.items():
            d = by_repo.get(w)
            if d is None:
                by_repo[w] = {r: c}
                by_lang[w] = {g: c}
                continue
            d[r] = d.get(r, 0) + c
            e = by_lang[w]
            e[g] = e.get(g, 0) + c
    words = sorted(by_repo)
    freqs, rd, ld = [], [], []
    for w in words:
        d, e = by_repo[w], by_lang[w]
        freqs.append(sum(d.values()))
        rd.append((tuple(d), tuple(d.values())))
        ld.append((tuple(e), tuple(e.values())))
    return SourceWords(words, freqs, rd, ld, list(repo_ix), list(lang_ix), len(records), n_bytes)


# --------------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MergeRecord:
    """One popped queue entry: a merge (or a skipped pair) with its statistics at that moment."""

    step: int
    left: str
    right: str
    freq: int
    repos: int
    languages: int
    priority: float
    top_share: float
    skipped: bool
    reason: str | None = None
    new: bool = True

    @property
    def token(self) -> str:
        """The merged string."""
        return self.left + self.right


@dataclass
class TrainState:
    """What the trainer leaves behind: merges, history and the final segmentation of every word."""

    merges: list[tuple[str, str]]
    history: list[MergeRecord]
    symbols: list[str]
    seqs: list[list[int]]
    word_index: list[int]
    seconds: float = 0.0


def train_source_bpe(
    sw: SourceWords,
    n_new: int,
    *,
    priority: str = DEFAULT_PRIORITY,
    skip: SkipRule | None = None,
    alphabet: Sequence[str] = ALPHABET,
    progress: Progress | None = None,
) -> TrainState:
    """Learn merges until `n_new` tokens outside `alphabet` exist (or the queue runs dry); see the module doc.

    The one trainer core (:func:`analysis.bpe.trainer.learn`) with source-attributed pair statistics.
    """
    t0 = time.perf_counter()
    stats = SourceStats(sw.repo_dist, sw.lang_dist, priority, skip)
    known = set(alphabet)
    run = learn(
        zip(sw.words, sw.freqs),
        n_new,
        known=known.__contains__,
        stats=stats,
        alphabet=alphabet,
        progress=progress,
    )
    history = [
        MergeRecord(step, p.left, p.right, p.freq, *p.info, p.skipped is not None, p.skipped, p.new)
        for step, p in enumerate(run.pops, 1)
    ]
    return TrainState(run.merges, history, run.symbols, run.seqs, run.word_index, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------------
# The tokenizer and the result
# --------------------------------------------------------------------------------------------------
def build_tokenizer(
    base: LoadedTokenizer,
    merges: Sequence[tuple[str, str]],
    *,
    specials: Sequence[str] = DEFAULT_SPECIALS,
    name: str = "sa-bpe",
) -> LoadedTokenizer:
    """A byte-level BPE tokenizer.json: base's normalizer/pre-tokenizer/decoder, 256 bytes + merges + specials."""
    doc = base.document()
    vocab: dict[str, int] = {}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = []
    for s in specials:
        if s in vocab:
            raise DataError(f"special token {s!r} collides with a learned token")
        added.append(
            {
                "id": len(vocab) + len(added),
                "content": s,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
    doc["model"] = bpe_model(vocab, [[a, b] for a, b in merges])
    doc["added_tokens"] = added
    post = doc.get("post_processor")
    if post is not None and post.get("type") != "ByteLevel":
        doc["post_processor"] = None  # templates of the base reference its own special tokens
    doc.pop("truncation", None)
    doc.pop("padding", None)
    doc["truncation"] = None
    doc["padding"] = None
    return LoadedTokenizer.from_document(doc, name=name, source=f"trained from {base.name}")


@dataclass
class SABPEResult:
    """One SA-BPE (or plain BPE) training run: tokenizer, merge history and per-token source statistics."""

    tokenizer: LoadedTokenizer
    priority: str
    skip: SkipRule
    vocab_size: int
    history: list[MergeRecord]
    merges: list[tuple[str, str]]
    token_sources: dict[str, tuple[int, int, int, str]]  # token -> (occurrences, top-repo count, R, top repo)
    n_repos: int
    n_languages: int
    n_records: int
    n_bytes: int
    word_types: int
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """`priority, skip rule` (e.g. `F*log(R)*L, skip R<2`)."""
        return f"{self.priority}, {self.skip.label()}"

    @property
    def n_skipped(self) -> int:
        """How many queue entries were skipped."""
        return sum(1 for h in self.history if h.skipped)

    def history_records(self) -> list[dict[str, Any]]:
        """The merge history as plain dicts (one per popped queue entry)."""
        return [
            {
                "step": h.step,
                "left": h.left,
                "right": h.right,
                "token": h.token,
                "freq": h.freq,
                "repos": h.repos,
                "languages": h.languages,
                "priority": h.priority,
                "top_share": h.top_share,
                "skipped": h.skipped,
                "reason": h.reason,
                "new": h.new,
            }
            for h in self.history
        ]

    def concentrated(self, k: int = 20, threshold: float = CONCENTRATION_THRESHOLD) -> list[dict[str, Any]]:
        """The learned tokens most concentrated in one repository (by training occurrences), most frequent first."""
        tok = self.tokenizer
        rows = []
        for t, (n, top, r, repo) in self.token_sources.items():
            if n and top / n >= threshold:
                rows.append(
                    {
                        "token": tok.readable(t),
                        "occurrences": n,
                        "top_repo": repo,
                        "top_share": top / n,
                        "repos": r,
                        "id": tok.vocab[t],
                    }
                )
        rows.sort(key=lambda x: (-x["occurrences"], x["id"]))
        return rows[:k]

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable summary (without the full history)."""
        merged = [h for h in self.history if not h.skipped]
        return {
            "priority": self.priority,
            "skip": {
                "min_repos": self.skip.min_repos,
                "min_languages": self.skip.min_languages,
                "max_share": self.skip.max_share,
            },
            "vocab_size": self.tokenizer.vocab_size,
            "vocab_size_requested": self.vocab_size,
            "merges": len(self.merges),
            "skipped": self.n_skipped,
            "single_repo_merges": sum(1 for h in merged if h.repos == 1),
            "single_language_merges": sum(1 for h in merged if h.languages == 1),
            "repos": self.n_repos,
            "languages": self.n_languages,
            "records": self.n_records,
            "bytes": self.n_bytes,
            "word_types": self.word_types,
            "seconds": self.seconds,
        }


def _token_sources(sw: SourceWords, st: TrainState) -> dict[str, tuple[int, int, int, str]]:
    """Training occurrences of every learned token per repository, from the final word segmentations."""
    alphabet = set(ALPHABET)
    per: dict[int, dict[int, int]] = {}
    for seq, wi in zip(st.seqs, st.word_index):
        ids, cs = sw.repo_dist[wi]
        for s in seq:
            if st.symbols[s] in alphabet:
                continue
            d = per.get(s)
            if d is None:
                d = per[s] = {}
            for r, c in zip(ids, cs):
                d[r] = d.get(r, 0) + c
    index = {s: i for i, s in enumerate(st.symbols)}
    out: dict[str, tuple[int, int, int, str]] = {}
    for a, b in st.merges:
        t = a + b
        if t in out:
            continue
        d = per.get(index[t], {})
        if d:
            top_r = max(d, key=lambda r: (d[r], -r))
            out[t] = (sum(d.values()), d[top_r], len(d), sw.repos[top_r])
        else:
            out[t] = (0, 0, 0, "")
    return out


def train(
    base: LoadedTokenizer,
    records: Sequence[CodeRecord] | SourceWords,
    vocab_size: int,
    *,
    priority: str = DEFAULT_PRIORITY,
    skip: SkipRule | None = None,
    specials: Sequence[str] = DEFAULT_SPECIALS,
    name: str | None = None,
    progress: Progress | None = None,
) -> SABPEResult:
    """Train a byte-level (SA-)BPE tokenizer of `vocab_size` (256 bytes + merges + specials) on code records."""
    priority = normalize_priority(priority)
    skip = skip or SkipRule()
    n_new = vocab_size - len(ALPHABET) - len(specials)
    if n_new <= 0:
        raise DataError(f"the vocabulary size must exceed {len(ALPHABET) + len(specials)} (bytes + specials)")
    t0 = time.perf_counter()
    sw = records if isinstance(records, SourceWords) else collect_words(base, records)
    if not sw.words:
        raise DataError("the training corpus has no words")
    t1 = time.perf_counter()
    st = train_source_bpe(sw, n_new, priority=priority, skip=skip, progress=progress)
    t2 = time.perf_counter()
    tok = build_tokenizer(base, st.merges, specials=specials, name=name or f"BPE [{priority}]")
    sources = _token_sources(sw, st)
    t3 = time.perf_counter()
    return SABPEResult(
        tokenizer=tok,
        priority=priority,
        skip=skip,
        vocab_size=vocab_size,
        history=st.history,
        merges=st.merges,
        token_sources=sources,
        n_repos=len(sw.repos),
        n_languages=len(sw.languages),
        n_records=sw.n_records,
        n_bytes=sw.n_bytes,
        word_types=len(sw.words),
        seconds={"collect": t1 - t0, "train": t2 - t1, "build": t3 - t2, "total": t3 - t0},
    )


# --------------------------------------------------------------------------------------------------
# Evaluation (paper §4.3, §5.2, App. D and G)
# --------------------------------------------------------------------------------------------------
#: The paper's Gini index over per-language compression rates (18 languages, vocabulary 32,768): Table 9 gives
#: it for BPE; the other values are :func:`analysis.measure.metrics.gini` of the per-language rates in Tables 10–11.
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


# --------------------------------------------------------------------------------------------------
# Parity-aware baseline: the code languages as the parity "languages"
# --------------------------------------------------------------------------------------------------
def records_by_language(records: Iterable[CodeRecord]) -> dict[str, list[str]]:
    """The records' texts grouped by language, languages in first-seen order."""
    out: dict[str, list[str]] = {}
    for r in records:
        out.setdefault(r.language, []).append(r.text)
    return out


def train_parity_baseline(
    base: LoadedTokenizer,
    by_language: Mapping[str, Sequence[str]],
    vocab_size: int,
    *,
    specials: Sequence[str] = DEFAULT_SPECIALS,
    variant: str = "base",
) -> tuple[LoadedTokenizer, float]:
    """Parity-aware BPE (:func:`analysis.bpe.parity.train_parity_bpe`) on the same code with each programming
    language as a parity language, on base's normalizer / pre-tokenizer, at SA-BPE's vocabulary size (256 bytes
    + merges + specials). Code is not parallel text, so there is no development set; every language gets the
    same target compression rate (`ratio` 1.0: the trainer next serves the language whose bytes/token on its own
    training text is lowest), which suits code, where every language is written in the same ASCII-dominated
    script. Returns the tokenizer and the training seconds."""
    require_byte_level(base)
    if len(by_language) < 2:
        raise DataError(
            "the parity-aware baseline balances programming languages: choose at least two "
            f"(got {', '.join(by_language) or 'none'})"
        )
    t0 = time.perf_counter()
    tk = train_parity_bpe(
        by_language,
        vocab_size,
        ratio=[1.0] * len(by_language),
        template=base,
        special_tokens=list(specials),
        variant=variant,
    )
    doc = json.loads(tk.to_str())
    tok = LoadedTokenizer.from_document(
        doc, name="Parity-aware BPE", source=f"parity-aware BPE trained from {base.name}"
    )
    return tok, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------------
# One run of the comparison (CLI `sabpe`, the SA-BPE page)
# --------------------------------------------------------------------------------------------------
#: Labels of the compared tokenizers, in display order.
RUN_LABELS = {"bpe": "BPE", "sabpe": "SA-BPE", "parity": "Parity-aware BPE"}


@dataclass
class SabpeComparison:
    """Plain BPE, SA-BPE and, optionally, the parity-aware baseline trained on the same code, measured on held-out
    repositories. :meth:`to_json` is the one document of the run: `python -m analysis sabpe --json` prints it,
    `--out` writes it as ``sabpe_report.json``, and the SA-BPE page offers it for download."""

    corpus: list[str]
    words: SourceWords
    runs: dict[str, SABPEResult]
    heldout: list[CodeRecord] = field(default_factory=list)
    parity: LoadedTokenizer | None = None
    parity_info: dict[str, Any] = field(default_factory=dict)
    counting: dict[str, Any] | None = None
    out: str | None = None
    _metrics: dict[str, dict[str, Any]] | None = field(default=None, repr=False)

    def tokenizers(self) -> dict[str, LoadedTokenizer]:
        """Key (`bpe`, `sabpe`, `parity`) → tokenizer, in display order."""
        out = {k: r.tokenizer for k, r in self.runs.items()}
        if self.parity is not None:
            out["parity"] = self.parity
        return {k: out[k] for k in RUN_LABELS if k in out}

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Held-out measures per run (empty without held-out records); computed once."""
        if self._metrics is None:
            m: dict[str, dict[str, Any]] = {}
            if self.heldout:
                for k, res in self.runs.items():
                    m[k] = evaluate(res, self.heldout)
                if self.parity is not None:
                    m["parity"] = tokenizer_metrics(self.parity, self.heldout)
            self._metrics = {k: m[k] for k in RUN_LABELS if k in m}
        return self._metrics

    def language_rows(self) -> list[dict[str, Any]]:
        """Per held-out language: files, bytes and, per run, compression (bytes/token) and coverage."""
        m = self.metrics()
        langs = sorted({g for v in m.values() for g in v.get("languages", {})})
        rows = []
        for g in langs:
            first = next(v["languages"][g] for v in m.values() if g in v.get("languages", {}))
            row: dict[str, Any] = {"language": g, "files": first["files"], "bytes": first["bytes"]}
            for k, v in m.items():
                per = v.get("languages", {}).get(g)
                row[f"{k}_bytes_per_token"] = per["bytes_per_token"] if per else None
                row[f"{k}_coverage"] = per["coverage"] if per else None
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        """The report: corpus, per run its training summary and held-out measures, the per-language compression
        table with each run's Gini over it next to the paper's, and the parity-aware baseline when trained."""
        sw = self.words
        out: dict[str, Any] = {
            "corpus": list(self.corpus),
            "records": sw.n_records,
            "repos": len(sw.repos),
            "languages": list(sw.languages),
            "bytes": sw.n_bytes,
            "word_types": len(sw.words),
            "heldout_records": len(self.heldout),
        }
        if self.counting is not None:
            out["counting"] = self.counting
        metrics = self.metrics()
        for k, res in self.runs.items():
            out[k] = res.summary()
            if k in metrics:
                out[k]["metrics"] = metrics[k]
            out[k]["most_concentrated"] = [r["token"] for r in res.concentrated(10)]
        if self.parity is not None:
            out["parity"] = {"vocab_size": self.parity.vocab_size, **self.parity_info}
            if "parity" in metrics:
                out["parity"]["metrics"] = metrics["parity"]
        rows = self.language_rows()
        if rows:
            out["language_compression"] = {
                "rows": rows,
                "gini": {k: v.get("language_compression_gini") for k, v in metrics.items()},
                "token_frequency_gini": {k: v["token_frequency_gini"] for k, v in metrics.items()},
                "paper": list(PAPER_LANGUAGE_GINI),
            }
        if self.out is not None:
            out["out"] = self.out
        return out
