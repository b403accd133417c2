"""Drift between two tokenizers, or two loadings of one (tokenizer.json vs vocab.json + merges.txt vs GGUF vs
tiktoken vs SentencePiece `.model`; two hub revisions): do they cut the same text into the same ids?

Per FLORES language (all lines of the split) and per content class (prose, code, numbers and dates, whitespace
runs, emoji and ZWJ sequences): the tokens of each, their ratio, the share of lines whose ids are identical and
the first line that differs, both tokenisations side by side; and the differences in the parts of the pipeline
that do not show in counts (special and added tokens, normalizer, pre-tokenizer, post-processor, decoder, chat
template). One :class:`DriftReport`, one :meth:`DriftReport.to_json` for the CLI and the page.

Lines are encoded without special tokens (the post-processor's BOS/EOS differences are listed among the pipeline
differences instead), in one Rust batch per language and tokenizer (:func:`analysis.measure.corpus_counts.encode_ids`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.measure.corpus_counts import encode_ids
from analysis.texts import probes
from analysis.texts.code import read_code
from analysis.texts.flores import FloresData, dataset
from analysis.tokenizer.document import describe_component
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: The content classes, in report order (prose = every FLORES line compared, over all languages).
CONTENT_CLASSES: tuple[str, ...] = ("prose", "code", "numbers", "whitespace", "emoji")
#: The code class: the held-out split of the shared code corpus, at most this many files and bytes per repository.
CODE_FILES_PER_REPO = 2
CODE_BYTES_PER_REPO = 24_000
#: A side-by-side line is cut to this many tokens per side (the whole line is in `text`).
SHOWN_TOKENS = 200


@dataclass(frozen=True)
class FirstDiff:
    """The first line (by index in its set) whose ids differ, with both tokenisations."""

    index: int
    text: str
    ids_a: list[int]
    ids_b: list[int]
    #: each token as readable text (:meth:`LoadedTokenizer.readable`)
    tokens_a: list[str]
    tokens_b: list[str]

    def to_json(self) -> dict[str, Any]:
        """The JSON form (the keys as the fields)."""
        return {"index": self.index, "text": self.text, "ids_a": self.ids_a, "ids_b": self.ids_b,
                "tokens_a": self.tokens_a, "tokens_b": self.tokens_b}  # fmt: skip


@dataclass(frozen=True)
class DriftRow:
    """One language or content class: lines compared, tokens of each tokenizer, share of identical lines."""

    name: str
    lines: int
    tokens_a: int
    tokens_b: int
    #: lines whose ids are identical
    identical_lines: int
    first_diff: FirstDiff | None

    @property
    def ratio(self) -> float | None:
        """tokens_b ÷ tokens_a (None when A has no tokens)."""
        return self.tokens_b / self.tokens_a if self.tokens_a else None

    @property
    def identical(self) -> float:
        """The share (0–1) of lines whose ids are identical (1.0 for an empty set)."""
        return self.identical_lines / self.lines if self.lines else 1.0

    def to_json(self, key: str) -> dict[str, Any]:
        """The JSON row; `key` names the row (`lang` for a language, `content` for a content class)."""
        return {
            key: self.name,
            "lines": self.lines,
            "tokens_a": self.tokens_a,
            "tokens_b": self.tokens_b,
            "ratio": self.ratio,
            "identical": self.identical,
            "identical_lines": self.identical_lines,
            "first_diff": self.first_diff.to_json() if self.first_diff else None,
        }


@dataclass(frozen=True)
class PipelineDiff:
    """One part of the pipeline that differs: what A and B have (readable lists)."""

    part: str
    a: list[str]
    b: list[str]

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"part": self.part, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class DriftReport:
    """The drift between tokenizers A and B (see the module docstring)."""

    a: str
    b: str
    languages: list[DriftRow]
    content: list[DriftRow]
    pipeline: list[PipelineDiff]
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def identical_everywhere(self) -> bool:
        """True when every line of every language and content class has identical ids."""
        return all(r.identical_lines == r.lines for r in (*self.languages, *self.content))

    def to_json(self) -> dict[str, Any]:
        """The one JSON document of the CLI's `--json` and the page's download."""
        return {
            "a": self.a,
            "b": self.b,
            "identical_everywhere": self.identical_everywhere,
            "languages": [r.to_json("lang") for r in self.languages],
            "content": [r.to_json("content") for r in self.content],
            "pipeline": [p.to_json() for p in self.pipeline],
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------------
# Comparing encodings
# --------------------------------------------------------------------------------------------------
def identical_mask(
    flat_a: np.ndarray, lens_a: np.ndarray, flat_b: np.ndarray, lens_b: np.ndarray
) -> np.ndarray:
    """Per line, whether the ids of A and B are identical: (flat ids, tokens per line) as :func:`encode_ids`
    returns them, compared in a few numpy passes (no Python loop over lines)."""
    same_len = lens_a == lens_b
    out = same_len.copy()
    sel = np.flatnonzero(same_len & (lens_a > 0))
    if not len(sel):
        return out
    starts_a = np.concatenate(([0], np.cumsum(lens_a)[:-1]))[sel]
    starts_b = np.concatenate(([0], np.cumsum(lens_b)[:-1]))[sel]
    n = lens_a[sel]
    seg = np.repeat(np.arange(len(sel)), n)
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    mismatch = flat_a[starts_a[seg] + within] != flat_b[starts_b[seg] + within]
    bad = np.bincount(seg[mismatch], minlength=len(sel)) > 0
    out[sel[bad]] = False
    return out


def _tokens(tok: LoadedTokenizer, ids: Sequence[int]) -> list[str]:
    id_to_token = tok.id_to_token
    return [tok.readable(id_to_token[i]) if i in id_to_token else f"<id {i}>" for i in ids]


def _first_diff(a: LoadedTokenizer, b: LoadedTokenizer, lines: Sequence[str], index: int) -> FirstDiff:
    text = lines[index]
    ids_a = a.tokenizer.encode(text, add_special_tokens=False).ids[:SHOWN_TOKENS]
    ids_b = b.tokenizer.encode(text, add_special_tokens=False).ids[:SHOWN_TOKENS]
    return FirstDiff(index, text, ids_a, ids_b, _tokens(a, ids_a), _tokens(b, ids_b))


def compare_lines(a: LoadedTokenizer, b: LoadedTokenizer, name: str, lines: Sequence[str]) -> DriftRow:
    """One row: encode `lines` with both tokenizers (one batch each) and compare them line by line."""
    lines = [s for s in lines if s]
    flat_a, lens_a = encode_ids(a, lines)
    # the same tokenizer.json bytes (two names for one file) encode the same: one encoding serves both
    flat_b, lens_b = (flat_a, lens_a) if a.digest == b.digest else encode_ids(b, lines)
    same = identical_mask(flat_a, lens_a, flat_b, lens_b)
    differing = np.flatnonzero(~same)
    first = _first_diff(a, b, lines, int(differing[0])) if len(differing) else None
    return DriftRow(name, len(lines), int(lens_a.sum()), int(lens_b.sum()), int(same.sum()), first)


# --------------------------------------------------------------------------------------------------
# Content classes
# --------------------------------------------------------------------------------------------------
def code_texts() -> list[str]:
    """The code class: whole files from the held-out split of the shared code corpus (a few per repository)."""
    return [r.text for r in read_code(heldout=True, max_files_per_repo=CODE_FILES_PER_REPO,
                                      max_bytes_per_repo=CODE_BYTES_PER_REPO)]  # fmt: skip


#: The generated and corpus sets of the content classes other than prose (whose lines are the FLORES lines).
CONTENT_SOURCES: dict[str, Callable[[], list[str]]] = {
    "code": code_texts,
    "numbers": probes.numbers_and_dates,
    "whitespace": probes.whitespace_runs,
    "emoji": probes.emoji_sequences,
}


def _prose_row(rows: Sequence[DriftRow]) -> DriftRow:
    """The prose class: the sum over the languages compared (its first difference: the first language's)."""
    first = next((r.first_diff for r in rows if r.first_diff), None)
    return DriftRow("prose", sum(r.lines for r in rows), sum(r.tokens_a for r in rows),
                    sum(r.tokens_b for r in rows), sum(r.identical_lines for r in rows), first)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------------
def _canonical(node: Any) -> str:
    return json.dumps(node, sort_keys=True, ensure_ascii=False)


def _templates(tok: LoadedTokenizer) -> dict[str, str]:
    raw = tok.config.get("chat_template")
    if isinstance(raw, str):
        return {"default": raw}
    if isinstance(raw, list):
        return {str(t.get("name")): str(t.get("template")) for t in raw if isinstance(t, dict)}
    return {}


def _template_summary(templates: dict[str, str], other: dict[str, str]) -> list[str]:
    if not templates:
        return ["(none)"]
    out = []
    for name, text in sorted(templates.items()):
        same = "identical" if other.get(name) == text else "differs"
        out.append(f"{name}: {len(text):,} characters ({same})")
    return out


def pipeline_diffs(a: LoadedTokenizer, b: LoadedTokenizer) -> list[PipelineDiff]:
    """The parts of the pipeline that differ between A and B (empty when none does): model type and size,
    special and added tokens (by text and id), normalizer, pre-tokenizer, post-processor, decoder, chat template."""
    out: list[PipelineDiff] = []
    if a.model_type != b.model_type:
        out.append(PipelineDiff("model type", [a.model_type], [b.model_type]))
    if a.vocab_size != b.vocab_size:
        out.append(PipelineDiff("vocabulary size", [f"{a.vocab_size:,}"], [f"{b.vocab_size:,}"]))
    for part, pick in (("special tokens", lambda t: t.special_tokens),
                       ("added tokens", lambda t: [x for x in t.added_tokens if not x.special])):  # fmt: skip
        ta = {(x.content, x.id) for x in pick(a)}
        tb = {(x.content, x.id) for x in pick(b)}
        if ta != tb:
            out.append(PipelineDiff(part, [f"{c!r} = {i}" for c, i in sorted(ta - tb, key=lambda p: p[1])],
                                    [f"{c!r} = {i}" for c, i in sorted(tb - ta, key=lambda p: p[1])]))  # fmt: skip
    for part, attr in (("normalizer", "normalizer"), ("pre-tokenizer", "pre_tokenizer"),
                       ("post-processor", "post_processor"), ("decoder", "decoder")):  # fmt: skip
        na, nb = getattr(a, attr), getattr(b, attr)
        if _canonical(na) != _canonical(nb):
            da, db = describe_component(na) or ["(none)"], describe_component(nb) or ["(none)"]
            if da == db:  # the same components with other settings: show the settings
                da, db = [_canonical(na)], [_canonical(nb)]
            out.append(PipelineDiff(part, da, db))
    ca, cb = _templates(a), _templates(b)
    if ca != cb:
        out.append(PipelineDiff("chat template", _template_summary(ca, cb), _template_summary(cb, ca)))
    return out


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------
def drift(
    a: LoadedTokenizer,
    b: LoadedTokenizer,
    langs: str | Sequence[str] | None = "all",
    *,
    content: Sequence[str] = CONTENT_CLASSES,
    data: FloresData | None = None,
    progress: Progress | None = None,
) -> DriftReport:
    """The drift between A and B over the FLORES languages `langs` ("all", comma-separated codes or a list; None
    or empty: none) and the content classes `content` (:data:`CONTENT_CLASSES`)."""
    bad = [c for c in content if c not in CONTENT_CLASSES]
    if bad:
        raise DataError(f"unknown content class {bad[0]!r} (choose from {', '.join(CONTENT_CLASSES)})")
    t0 = time.perf_counter()
    codes: list[str] = []
    if langs:
        data = data or dataset()
        codes = data.resolve_many(langs if isinstance(langs, str) else list(langs))
    others = [c for c in content if c != "prose"]
    total = len(codes) + len(others)
    rows: list[DriftRow] = []
    for k, code in enumerate(codes):
        report(progress, k, total, f"{code} ({k + 1}/{len(codes)})")
        rows.append(compare_lines(a, b, code, data.lines(code)))  # type: ignore[union-attr]
    classes: list[DriftRow] = []
    notes: list[str] = []
    for name in content:
        if name == "prose":
            if rows:
                classes.append(_prose_row(rows))
            else:
                notes.append("prose: no FLORES language compared")
            continue
        report(progress, len(codes) + others.index(name), total, name)
        try:
            texts = CONTENT_SOURCES[name]()
        except DataError as e:  # the code corpus is not installed: the other classes still count
            notes.append(f"{name}: {e}")
            continue
        classes.append(compare_lines(a, b, name, texts))
    report(progress, total, total, "done")
    return DriftReport(a.name, b.name, rows, classes, pipeline_diffs(a, b), time.perf_counter() - t0, notes)
