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
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from analysis.texts.code import CodeRecord
from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.document import bpe_model
from analysis.tokenizer.tokenizer import LoadedTokenizer

__all__ = [  # the priorities and the skip rule live with the trainer core; SA-BPE's API names them here too
    "ALPHABET",
    "CONCENTRATION_THRESHOLD",
    "DEFAULT_PRIORITY",
    "DEFAULT_SPECIALS",
    "PRIORITIES",
    "PRIORITY_HELP",
    "MergeRecord",
    "SABPEResult",
    "SkipRule",
    "SourceWords",
    "TrainState",
    "build_tokenizer",
    "collect_words",
    "normalize_priority",
    "priority_function",
    "records_by_language",
    "require_byte_level",
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
