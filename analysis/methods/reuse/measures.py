"""What an R-BPE tokenizer (:mod:`analysis.methods.reuse.reuse`) gains and what it breaks, measured on FLORES-200.

The measures of Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving BPE-Tokenizers with Token Reuse" (EMNLP 2025),
before and after reuse, on the same lines:

* fertility (tokens per whitespace word) and bytes/token;
* premium against English (Petrov et al. 2023: the mean of per-sentence token ratios on parallel sentences,
  :func:`analysis.measure.grid.premium`; the paper's Table 3) and the Σ-token ratio;
* the proportion of continued words (words split into ≥ 2 tokens, punctuation tokens counting as words of
  their own, :func:`analysis.measure.corpus_counts.continued_words`); after reuse, a token from the new
  tokenizer is judged by its own string, not by the old token whose id it reuses;
* fertility per class: the languages of the paper's Table 2 (Arabic, English, Korean, Russian, Greek, Thai).

The collateral table (:func:`collateral`) runs every FLORES language through encode → decode: reused ids
decode as target-script tokens everywhere, so a language whose text uses a reused id no longer round-trips.
Each row gives the share of its ids that were reused, whether every line round-trips, and one broken line.

:func:`measure_reuse` puts it together as one :class:`ReuseReport`, whose ``to_json()`` is what
`python -m analysis reuse --json` prints and the Token reuse page offers for download.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.core.cache import DiskCache
from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.measure.corpus_counts import continued_words, text_counts, token_facts
from analysis.measure.grid import premium
from analysis.measure.robustness import Codec, RobustnessDelta, robustness_delta
from analysis.texts import flores

from .classes import DEMO_LANGS
from .reuse import ReuseTokenizer
from .segments import char_class, language_role

#: The languages of Table 2 of the R-BPE paper (fertility per class).
TABLE2_LANGS = {
    "Arabic": "arb_Arab",
    "English": "eng_Latn",
    "Korean": "kor_Hang",
    "Russian": "rus_Cyrl",
    "Greek": "ell_Grek",
    "Thai": "tha_Thai",
}
SPLITS = ("heldout", "all")
EXAMPLE_CHARS = 90
#: The collateral tables kept on disk: one document per R-BPE tokenizer, languages, split, reference and FLORES
#: texts (a second session, a rerun or the CLI after the page reads it back). Bump when a row changes.
COLLATERAL_VERSION = 1
_COLLATERAL = DiskCache("reuse-collateral", COLLATERAL_VERSION)


# --------------------------------------------------------------------------------------------------
# Continued words with the R-BPE tokens
# --------------------------------------------------------------------------------------------------
class _RbpeFacts:
    """`word_start`, `space_only` and `punct` per token of an R-BPE encoding, in one id space: old ids as they
    are, new-tokenizer ids shifted by the old vocabulary size (the facts
    :class:`analysis.measure.corpus_counts.TokenFacts` keeps, for the strings the tokens really stand for)."""

    def __init__(self, rt: ReuseTokenizer, flat_old: np.ndarray, flat_new: np.ndarray) -> None:
        old = token_facts(rt.old)
        used_old = np.unique(flat_old[flat_new < 0])
        old.ensure(used_old)
        self.offset = max(old.size, int(flat_old.max()) + 1 if flat_old.size else 0)
        size = self.offset + rt.new.get_vocab_size(with_added_tokens=True)
        self.word_start = np.zeros(size, dtype=bool)
        self.space_only = np.zeros(size, dtype=bool)
        self.punct = np.zeros(size, dtype=bool)
        n = old.size
        self.word_start[:n], self.space_only[:n], self.punct[:n] = old.word_start, old.space_only, old.punct
        added = {a.content for a in rt.old.added_tokens}
        for nid in np.unique(flat_new[flat_new >= 0]).tolist():
            token = rt.new.id_to_token(nid) or ""
            k = self.offset + nid
            if token in added:
                self.word_start[k] = True
                continue
            bs = rt.old.token_bytes(token)
            self.word_start[k] = bool(bs) and bs[:1].isspace()
            self.space_only[k] = bool(bs) and bs.isspace()
            try:
                core = bs.decode("utf-8").strip()
            except UnicodeDecodeError:
                continue
            self.punct[k] = bool(core) and all(unicodedata.category(ch)[0] in "PS" for ch in core)


def _continued_share(facts: Any, flat: np.ndarray, lens: np.ndarray) -> float | None:
    words, cont = continued_words(facts, flat, lens)
    return cont / words if words else None


# --------------------------------------------------------------------------------------------------
# Before / after on one language
# --------------------------------------------------------------------------------------------------
def _encode(rt: ReuseTokenizer, lines: Sequence[str]) -> dict[str, Any]:
    """Old and R-BPE encodings of lines: per-line counts, flat ids (R-BPE: old ids and new-tokenizer tags)."""
    tagged = rt.encode_batch_tagged(lines)
    # the old tokenizer's encoding of a line: already there when R-BPE encoded the whole line with it
    # (no token from the new tokenizer: no target segment, so the whole line was one old-tokenizer segment)
    redo = [k for k, (_, tags) in enumerate(tagged) if not tags or max(tags) >= 0]
    again = iter(rt.old.tokenizer.encode_batch_fast([lines[k] for k in redo], add_special_tokens=False))
    todo = set(redo)
    old = [next(again).ids if k in todo else ids for k, (ids, _) in enumerate(tagged)]
    return {
        "old": old,
        "new": [ids for ids, _ in tagged],
        "tags": [tags for _, tags in tagged],
        "len_old": np.fromiter(map(len, old), np.int64, len(old)),
        "len_new": np.fromiter((len(ids) for ids, _ in tagged), np.int64, len(tagged)),
    }


def _flat(seqs: Sequence[Sequence[int]]) -> np.ndarray:
    return np.fromiter((i for s in seqs for i in s), np.int64, sum(map(len, seqs)))


def _side(tokens: np.ndarray, tc: dict[str, np.ndarray], ref: np.ndarray | None, cont: float | None) -> dict:
    toks, words, nbytes = int(tokens.sum()), int(tc["words"].sum()), int(tc["bytes"].sum())
    parallel = ref is not None and ref.size == tokens.size and ref.sum() > 0
    return {
        "tokens": toks,
        "fertility": toks / words if words else None,
        "bytes_per_token": nbytes / toks if toks else None,
        "continued_words": cont,
        "premium": premium(tokens, ref) if parallel else None,
        "parity_corpus": float(tokens.sum() / ref.sum()) if parallel else None,
    }


def compare(
    rt: ReuseTokenizer, lines: Sequence[str], reference: Sequence[str] | None = None
) -> dict[str, Any]:
    """Before vs after reuse on lines: tokens, fertility, bytes/token, continued words and — with parallel
    `reference` lines (English) — the premium and Σ-token ratio, each side against its own tokenization of the
    reference. ``fertility_change`` is after / before − 1."""
    keep = [k for k, s in enumerate(lines) if s.strip()]
    if not keep:
        raise DataError("no non-empty lines to measure")
    ref_lines = None
    if reference is not None:  # parallel: the same sentences are dropped on both sides
        parallel = len(reference) == len(lines)
        ref_lines = [reference[k] for k in keep] if parallel else [s for s in reference if s.strip()]
    lines = [lines[k] for k in keep]
    enc = _encode(rt, lines)
    ref_old = ref_new = None
    if ref_lines:
        renc = _encode(rt, ref_lines)
        ref_old, ref_new = renc["len_old"], renc["len_new"]
    tc = text_counts(lines)
    old_facts = token_facts(rt.old)
    flat_old = _flat(enc["old"])
    old_facts.ensure(np.unique(flat_old))
    flat_rbpe, flat_tags = _flat(enc["new"]), _flat(enc["tags"])
    facts = _RbpeFacts(rt, flat_rbpe, flat_tags)
    virtual = np.where(flat_tags >= 0, facts.offset + flat_tags, flat_rbpe)
    before = _side(enc["len_old"], tc, ref_old, _continued_share(old_facts, flat_old, enc["len_old"]))
    after = _side(enc["len_new"], tc, ref_new, _continued_share(facts, virtual, enc["len_new"]))
    out: dict[str, Any] = {"lines": len(lines), "before": before, "after": after}
    fb, fa = before["fertility"], after["fertility"]
    out["fertility_change"] = fa / fb - 1.0 if fb and fa is not None else None
    return out


# --------------------------------------------------------------------------------------------------
# Collateral damage over every FLORES language
# --------------------------------------------------------------------------------------------------
def _example(text: str, decoded: str) -> dict[str, str]:
    """The text and its decoding around the first difference (about EXAMPLE_CHARS characters)."""
    k = next((i for i, (a, b) in enumerate(zip(text, decoded)) if a != b), min(len(text), len(decoded)))
    lo = max(0, k - EXAMPLE_CHARS // 3)
    hi = lo + EXAMPLE_CHARS
    pre = "…" if lo else ""
    return {
        "text": pre + text[lo:hi] + ("…" if hi < len(text) else ""),
        "decoded": pre + decoded[lo:hi] + ("…" if hi < len(decoded) else ""),
    }


def _lines(lang: str, split: str) -> list[str]:
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return flores.split_lines(lang)[1] if split == "heldout" else flores.lines(lang)


def collateral(
    rt: ReuseTokenizer,
    langs: str | Sequence[str] | None = "all",
    *,
    split: str = "heldout",
    reference: str = flores.ENGLISH,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """One row per FLORES language: its role (``target`` / ``reused`` script / ``kept``), the share of its R-BPE
    ids that are reused ids, how many lines no longer decode exactly (`round_trip` when none), an example, and
    fertility and premium before/after. `split` ``heldout`` uses the lines after
    :data:`analysis.texts.flores.FLORES_TRAIN_LINES`, ``all`` every devtest line."""
    data = flores.dataset()
    codes = data.resolve_many(langs)
    ref_code = data.resolve(reference) if reference in data else None
    key = _collateral_key(rt, data, codes, split, ref_code)
    stored = _COLLATERAL.get(key)
    if isinstance(stored, list) and [r.get("lang") if isinstance(r, dict) else None for r in stored] == codes:
        report(progress, len(codes), len(codes), "collateral: read back from the disk store")
        return stored
    rows = _collateral_rows(rt, codes, split, ref_code, progress)
    _COLLATERAL.put(key, rows)  # best effort: a full or read-only store only costs the next caller the time
    return rows


def _collateral_key(rt: ReuseTokenizer, data: Any, codes: Sequence[str], split: str, ref: str | None) -> str:
    """The disk-store key of one collateral table: the tokenizer, and per language its code and texts' hash."""
    h = hashlib.sha256(f"{rt.content_hash}|{split}|{flores.FLORES_TRAIN_LINES}|{ref}".encode())
    h.update(data.texts_key([*codes, *([ref] if ref else [])]).encode())
    return h.hexdigest()[:32]


def _collateral_rows(
    rt: ReuseTokenizer, codes: Sequence[str], split: str, ref_code: str | None, progress: Progress | None
) -> list[dict[str, Any]]:
    """:func:`collateral`'s rows, computed."""
    ref = _encode(rt, _lines(ref_code, split)) if ref_code else None
    reusable = rt.info.get("reusable_blocks", [])
    rows = []
    for k, code in enumerate(codes):
        lines = _lines(code, split)
        enc = _encode(rt, lines)
        tc = text_counts(lines)
        broken = [(s, ids) for s, ids in zip(lines, enc["new"]) if not rt.round_trips(ids, s)]
        flat = _flat(enc["new"])
        reused = int(np.isin(flat, np.fromiter(rt.reused_ids, np.int64)).sum()) if flat.size else 0
        words = int(tc["words"].sum())
        meta = flores.language(code)
        parallel = ref is not None and ref["len_old"].size == len(lines)
        rows.append(
            {
                "lang": code,
                "name": meta.name,
                "script": meta.script,
                "role": language_role(lines, rt.target_blocks, reusable),
                "lines": len(lines),
                "tokens_before": int(enc["len_old"].sum()),
                "tokens_after": int(enc["len_new"].sum()),
                "ids_changed": reused / flat.size if flat.size else 0.0,
                "broken_lines": len(broken),
                "round_trip": not broken,
                "example": _example(broken[0][0], rt.decode(broken[0][1])) if broken else None,
                "fertility_before": int(enc["len_old"].sum()) / words if words else None,
                "fertility_after": int(enc["len_new"].sum()) / words if words else None,
                "premium_before": premium(enc["len_old"], ref["len_old"]) if parallel else None,
                "premium_after": premium(enc["len_new"], ref["len_new"]) if parallel else None,
            }
        )
        report(progress, k + 1, len(codes), f"collateral: {code}")
    return rows


def collateral_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How many languages no longer round-trip, by role, and which kept-script languages break."""
    broken = [r for r in rows if not r["round_trip"]]
    by_role: dict[str, int] = {}
    for r in broken:
        by_role[r["role"]] = by_role.get(r["role"], 0) + 1
    return {
        "languages": len(rows),
        "not_round_trip": len(broken),
        "not_round_trip_by_role": dict(sorted(by_role.items())),
        "kept_languages_broken": [r["lang"] for r in broken if r["role"] == "kept"],
    }


def fertility_by_class(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fertility before/after for the languages of the paper's Table 2 that the collateral rows hold."""
    by_lang = {r["lang"]: r for r in rows}
    return {
        name: {
            "lang": code,
            "before": by_lang[code]["fertility_before"],
            "after": by_lang[code]["fertility_after"],
        }
        for name, code in TABLE2_LANGS.items()
        if code in by_lang
    }


# --------------------------------------------------------------------------------------------------
# The reused script now decodes as the target
# --------------------------------------------------------------------------------------------------
def reused_script_demo(rt: ReuseTokenizer, text: str | None = None) -> dict[str, Any] | None:
    """Encode text from a reused script and decode it again: it comes back in the target script."""
    if text is None:
        reusable = re.compile(char_class(rt.info.get("reusable_blocks", [])))
        for lang in DEMO_LANGS:
            try:
                line = flores.lines(lang)[0]
            except DataError:
                continue
            if reusable.search(line):
                text = line
                break
        if text is None:
            return None
    ids = rt.encode(text)
    return {
        "text": text,
        "ids": ids,
        "n_reused": sum(1 for i in ids if i in rt.reused_ids),
        "decoded": rt.decode(ids),
    }


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------
#: build facts left out of the report (long: every class count, every reusable block)
_INFO_LEFT_OUT = ("classes", "reusable_blocks")


@dataclass
class ReuseReport:
    """What an R-BPE tokenizer gains and breaks (:func:`measure_reuse`): the build facts, the measures before
    and after on the held-out FLORES lines of the training language and of the reference language, the reused
    script decoding as the target, optionally the collateral table, and where it was written."""

    rt: ReuseTokenizer
    train_lang: str
    reference_lang: str | None
    #: :func:`compare` on the held-out lines of `train_lang` (premium against `reference_lang`)
    heldout: dict[str, Any]
    #: :func:`compare` on the held-out lines of `reference_lang` itself (None without a reference)
    reference: dict[str, Any] | None
    #: :func:`reused_script_demo`
    demo: dict[str, Any] | None
    #: seconds the build took (classification, training, mapping)
    seconds: float = 0.0
    #: the lines of the collateral table (``heldout`` / ``all``; None: not measured)
    collateral_split: str | None = None
    collateral: list[dict[str, Any]] | None = None
    #: :func:`analysis.methods.reuse.model.export_model`'s summary, when a model was written
    model: dict[str, Any] | None = None
    #: the folder the tokenizer (and model) went to
    out: str | None = None
    #: the robustness before → after (:meth:`analysis.measure.robustness.RobustnessDelta.to_json`), when measured
    robustness: dict[str, Any] | None = None

    def measure_robustness(self, *, progress: Progress | None = None) -> None:
        """Fill :attr:`robustness` on the held-out lines of the training and reference languages
        (:func:`reuse_robustness`)."""
        langs = [self.train_lang] + ([self.reference_lang] if self.reference_lang else [])
        held = {lang: flores.split_lines(lang)[1] for lang in langs}
        self.robustness = reuse_robustness(self.rt, held, progress=progress).to_json()

    def measure_collateral(self, split: str = "heldout", *, progress: Progress | None = None) -> None:
        """Fill the collateral table over every FLORES language (:func:`collateral`)."""
        ref = self.reference_lang or ""  # no reference language: no premiums
        self.collateral = collateral(self.rt, "all", split=split, reference=ref, progress=progress)
        self.collateral_split = split

    def to_json(self) -> dict[str, Any]:
        """The build facts (``rt.info`` without the class counts and block list), ``seconds``, ``heldout`` and
        ``heldout_reference`` (lines, before, after, fertility change), ``reused_script_demo``, and when present
        ``collateral_split``, ``collateral_summary``, ``fertility_by_class``, ``collateral``, ``model``, ``out``."""
        rep: dict[str, Any] = {k: v for k, v in self.rt.info.items() if k not in _INFO_LEFT_OUT}
        rep["seconds"] = self.seconds
        rep["heldout"] = {"lang": self.train_lang, "reference": self.reference_lang, **self.heldout}
        if self.reference is not None:
            rep["heldout_reference"] = {"lang": self.reference_lang, **self.reference}
        if self.demo:
            rep["reused_script_demo"] = {k: self.demo[k] for k in ("text", "decoded", "n_reused")}
        if self.collateral is not None:
            rep["collateral_split"] = self.collateral_split
            rep["collateral_summary"] = collateral_summary(self.collateral)
            rep["fertility_by_class"] = fertility_by_class(self.collateral)
            rep["collateral"] = self.collateral
        if self.model is not None:
            rep["model"] = self.model
        if self.out is not None:
            rep["out"] = self.out
        if self.robustness is not None:
            rep["robustness"] = self.robustness
        return rep


def reuse_codec(rt: ReuseTokenizer) -> Codec:
    """An R-BPE tokenizer as the robustness measures see it: its own encoder (two tokenizers and the id map), its
    own decoder."""

    def spans(lines: Sequence[str]) -> list[list[tuple[int, int]]]:
        return [rt.encode_with_offsets(line)[1] for line in lines]

    return Codec(spans, lambda text: rt.decode(rt.encode(text)), rt.encode)


def reuse_robustness(
    rt: ReuseTokenizer,
    heldout: dict[str, Sequence[str]],
    *,
    pathological: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> RobustnessDelta:
    """:func:`analysis.measure.robustness.robustness_delta` of an R-BPE tokenizer against its original
    (`pathological`: the inputs to time, default the 512 KiB set)."""
    return robustness_delta(rt.old, reuse_codec(rt), heldout, pathological=pathological, progress=progress)


def measure_reuse(
    rt: ReuseTokenizer,
    train_lang: str,
    reference_lang: str | None = flores.ENGLISH,
    *,
    collateral_split: str | None = None,
    seconds: float = 0.0,
    progress: Progress | None = None,
) -> ReuseReport:
    """Measure an R-BPE tokenizer on held-out FLORES: the lines after :data:`analysis.texts.flores.FLORES_TRAIN_LINES`
    of `train_lang` (premium against the same lines of `reference_lang`) and of `reference_lang` itself; the
    reused-script demo; with `collateral_split` (``heldout`` / ``all``) the collateral table too."""
    heldout = flores.split_lines(train_lang)[1]
    ref_lines = flores.split_lines(reference_lang)[1] if reference_lang else None
    report = ReuseReport(
        rt=rt,
        train_lang=train_lang,
        reference_lang=reference_lang,
        heldout=compare(rt, heldout, ref_lines),
        reference=compare(rt, ref_lines, ref_lines) if ref_lines is not None else None,
        demo=reused_script_demo(rt),
        seconds=seconds,
    )
    if collateral_split is not None:
        report.measure_collateral(collateral_split, progress=progress)
    return report
