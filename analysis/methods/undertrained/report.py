"""The whole under-trained analysis of one model + tokenizer: :func:`analyze` (indicators, references, round
trip, candidates), :func:`verify_result` (verification of the first candidates), the typed result with its
``to_json()`` for the CLI and the page, and the token-health table joined with the STT."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.bpe import stt_report
from analysis.core.cache import DiskCache
from analysis.core.progress import Progress, report
from analysis.core.unicode import text_script
from analysis.errors import DataError, ModelLoadError, UnsupportedTokenizerError
from analysis.model.matrix import EmbeddingWeights, Matrix
from analysis.model.models import Placement, plan_placement
from analysis.model.source import ModelSource, resolve_model, tokenizer_for_model
from analysis.model.weights import load_embeddings
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .classes import token_class
from .indicators import (
    INDICATOR_LABELS,
    compute_indicators,
    default_main_indicator,
    duplicate_row_groups,
    resolve_device,
    row_norms,
    select_candidates,
)
from .references import References, auto_references, user_references
from .roundtrip import PADDING_ROW, RoundTrip, round_trip_categories, special_ids
from .verification import TEMPLATES, PromptResult, Verification, Verifier, load_lm, verdict_for


@dataclass
class UndertrainedResult:
    """Everything the page and the CLI show for one model + tokenizer."""

    model_label: str
    tokenizer_name: str
    weights: dict[str, Any]
    tied: bool
    has_lm_head: bool
    n_rows: int
    n_tokens: int
    references: References
    indicators: dict[str, np.ndarray]
    main: str
    round_trip: RoundTrip
    tokens: list[str]
    specials: set[int]
    threshold: float
    percentile: float
    candidates: list[int]
    verifications: dict[int, Verification] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: where the indicators ran and where verification placed the model (analysis.model.models.Placement)
    placement: dict[str, Any] = field(default_factory=dict)

    @property
    def main_values(self) -> np.ndarray:
        """The main indicator over all rows."""
        return self.indicators[self.main]

    def stats(self) -> dict[str, float]:
        """Mean ± std of the main indicator over the tokenizer's tokens."""
        v = self.main_values[: self.n_tokens].astype(np.float64)
        v = v[np.isfinite(v)]  # rows holding NaN/inf are reported in `notes`, not averaged in
        return {"mean": float(v.mean()) if v.size else None, "std": float(v.std()) if v.size else None}

    def category(self, i: int) -> str:
        """Round-trip category of an id (PADDING_ROW beyond the tokenizer)."""
        return self.round_trip.categories[i] if i < len(self.round_trip.categories) else PADDING_ROW

    def token_class(self, i: int) -> str:
        """Rule-based token class of an id (:func:`token_class`)."""
        if i >= self.n_tokens:
            return "Other"
        return token_class(self.tokens[i], special=i in self.specials)

    def candidate_rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The candidates as `{"id", "token", "indicator", …}` (+ max_prob, verdict when verified)."""
        out = []
        refs = set(self.references.ids)
        for i in self.candidates[:limit]:
            row: dict[str, Any] = {
                "id": i,
                "token": self.tokens[i],
                "indicator": float(self.main_values[i]),
                "category": self.category(i),
                "class": self.token_class(i),
                "script": text_script(self.tokens[i]),
                "reference": i in refs,
            }
            v = self.verifications.get(i)
            if v is not None:
                row["max_prob"] = v.max_prob
                row["verdict"] = v.verdict
            out.append(row)
        return out

    def verification_queue(self, k: int, *, include_references: bool = False) -> list[int]:
        """The ids a verification of the first `k` candidates runs, lowest indicator first.

        The reference tokens are left out unless `include_references`: they are known to be unused (that is why
        they are references) and, being the rows the indicators measure distances to, they fill the first
        places of the candidate list. Ids verified already are skipped, so a stopped run resumes.
        """
        refs = set() if include_references else set(self.references.ids)
        eligible = [i for i in self.candidates if i not in refs][: max(0, k)]
        return [i for i in eligible if i not in self.verifications]

    def reference_validation(self) -> dict[str, Any] | None:
        """How the held-out known-unused tokens rank under the main indicator (share in the lowest 5%)."""
        held = [i for i in self.references.held_out if i < self.n_tokens]
        if not held:
            return None
        v = self.main_values[: self.n_tokens]
        ranks = np.argsort(np.argsort(v, kind="stable"), kind="stable")
        pct = ranks[held] / len(v)
        return {
            "held_out": len(held),
            "share_lowest_5pct": float((pct < 0.05).mean()),
            "median_percentile": float(np.median(pct) * 100),
        }

    def to_json(self, *, max_candidates: int | None = None) -> dict[str, Any]:
        """The CLI's JSON document."""
        return {
            "model": self.model_label,
            "tokenizer": self.tokenizer_name,
            "tied": self.tied,
            "has_lm_head": self.has_lm_head,
            "weights": self.weights,
            "rows": self.n_rows,
            "tokens": self.n_tokens,
            "reference_ids": self.references.ids,
            "reference_source": self.references.source,
            "reference_reasons": {str(i): self.references.reasons.get(i, "") for i in self.references.ids},
            "indicator": self.main,
            "indicator_label": INDICATOR_LABELS.get(self.main, self.main),
            "indicator_names": list(self.indicators),
            "indicator_stats": self.stats(),
            "percentile": self.percentile,
            "threshold": self.threshold,
            "n_candidates": len(self.candidates),
            "reference_validation": self.reference_validation(),
            "candidates": self.candidate_rows(max_candidates),
            "verified": len(self.verifications),
            "verdict_counts": _count(v.verdict for v in self.verifications.values()),
            "timings_s": {k: round(v, 6) for k, v in self.timings.items()},
            "placement": self.placement,
            "notes": self.notes,
        }


def ordinal(x: float) -> str:
    """An English ordinal for a percentile: 1st, 2nd, 3rd, 4th, 11th, 12th, 22nd, 2.5th."""
    if x != int(x):
        return f"{x:g}th"
    n = int(x)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _count(xs: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def check_percentile(percentile: float) -> None:
    """DataError unless the candidate percentile is a number in [0, 100]."""
    if not (isinstance(percentile, (int, float)) and math.isfinite(percentile) and 0 <= percentile <= 100):
        raise DataError(f"the candidate percentile must be between 0 and 100, not {percentile}")


def analyze(
    model: str | ModelSource,
    tokenizer: LoadedTokenizer | None = None,
    *,
    reference_ids: list[int] | None = None,
    remove_pc1: bool = False,
    percentile: float = 2.0,
    main: str | None = None,
    weights: EmbeddingWeights | None = None,
    device: str | None = None,
) -> UndertrainedResult:
    """Indicators, references, round-trip categories and candidates for a model (no verification).

    `device` runs the indicators on a GPU (`cuda`, `cuda:N`, or `auto` = CUDA when present); None = CPU."""
    check_percentile(percentile)
    t0 = time.perf_counter()
    src = model if isinstance(model, ModelSource) else resolve_model(model)
    tok = tokenizer or tokenizer_for_model(src)
    t1 = time.perf_counter()
    w = weights or load_embeddings(src, vocab_size=tok.vocab_size)
    t2 = time.perf_counter()
    notes = list(w.notes)
    n_rows = w.n_rows
    n_tokens = min(tok.vocab_size, n_rows)
    if n_rows < tok.vocab_size:
        notes.append(
            f"the tokenizer has {tok.vocab_size} tokens but the model only {n_rows} rows; "
            "ids ≥ rows are ignored (wrong tokenizer?)"
        )
    rt = round_trip_categories(tok)
    t3 = time.perf_counter()
    if reference_ids:
        refs = user_references(reference_ids, tok)
    else:
        pad = row_norms(_row_slice(w.unembedding, tok.vocab_size)) if n_rows > tok.vocab_size else None
        dups = duplicate_row_groups(w.unembedding)
        refs = auto_references(tok, n_rows, padding_norms=pad, round_trip=rt, duplicate_groups=dups)
    outside = [i for i in refs.ids if not 0 <= i < n_rows]
    if reference_ids and outside:
        raise DataError(
            f"reference ids outside the model's {n_rows:,} embedding rows: {', '.join(map(str, outside[:5]))}"
        )
    refs.ids = [i for i in refs.ids if i < n_rows]
    dev = resolve_device(device, w.unembedding.nbytes)
    indicators = compute_indicators(w, refs.ids or None, remove_pc1=remove_pc1, device=dev)
    t4 = time.perf_counter()
    names = list(indicators)
    main = main or default_main_indicator(names, remove_pc1)
    if main not in indicators:
        raise DataError(f"indicator {main!r} is not available here; choose one of {', '.join(names)}")
    bad_rows = int((~np.isfinite(np.asarray(indicators[main][:n_tokens], dtype=np.float64))).sum())
    if n_tokens and bad_rows == n_tokens:
        raise ModelLoadError(
            f"{src.label}: every embedding row gives a NaN or infinite {main}: the weights hold no usable values"
        )
    if bad_rows:
        notes.append(
            f"{bad_rows:,} rows give a NaN or infinite {main} (corrupt weights?): they are left out of the "
            "statistics and are never candidates"
        )
    id_to_tok = tok.id_to_token
    tokens = [tok.readable(id_to_tok[i]) if i in id_to_tok else f"⟨row {i}⟩" for i in range(n_rows)]
    thr, cands = select_candidates(indicators[main], rt.categories, percentile=percentile, n_tokens=n_tokens)
    return UndertrainedResult(
        model_label=src.label,
        tokenizer_name=tok.name,
        weights=w.summary(),
        tied=w.tied,
        has_lm_head=w.has_lm_head,
        n_rows=n_rows,
        n_tokens=n_tokens,
        references=refs,
        indicators=indicators,
        main=main,
        round_trip=rt,
        tokens=tokens,
        specials=special_ids(tok),
        threshold=thr,
        percentile=percentile,
        candidates=cands,
        timings={"tokenizer": t1 - t0, "read_weights": t2 - t1, "round_trip": t3 - t2, "indicators": t4 - t3},
        notes=notes,
        placement={"indicators_device": dev},
    )


def _row_slice(m: Matrix, start: int) -> Matrix:
    return Matrix(m.raw[start:], m.dtype, m.name)


@dataclass
class PlacedLM:
    """A causal LM loaded for verification (:func:`place_lm`) and where it went."""

    model: Any
    #: the device of the input embeddings (where input ids go)
    device: str
    #: :meth:`analysis.model.models.Placement.to_json` plus ``device_map_summary`` (modules per device, or None)
    placement: dict[str, Any]


def place_lm(
    model: str | ModelSource,
    *,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: dict[Any, str] | None = None,
) -> PlacedLM:
    """Plan where the model goes (:func:`analysis.model.models.plan_placement`: one device when it fits, CUDA if
    present; else, or when `device_map`/`max_memory` are given, accelerate's ``device_map="auto"``) and load it.

    A CUDA device or a GPU memory cap on a machine without CUDA is a DataError (before anything is loaded)."""
    src = model if isinstance(model, ModelSource) else resolve_model(model)
    return _place(src, plan_placement(src, device=device, device_map=device_map, max_memory=max_memory))


def _place(src: ModelSource, plan: Placement) -> PlacedLM:
    net, dev = load_lm(src, device=plan.device, device_map=plan.device_map, max_memory=plan.max_memory)
    return PlacedLM(net, dev, {**plan.to_json(), "device_map_summary": _device_map_summary(net)})


#: Verification results kept on disk (the measured probabilities and outputs of each candidate's prompts), by
#: model files, tokenizer, prompts, placement and batch size: a second session or CLI run on the same model reads
#: them instead of loading it, and a stopped run resumes there. Bump when the prompts' construction changes.
VERIFIED_STORE_VERSION = 1
_VERIFIED = DiskCache("undertrained-verified", VERIFIED_STORE_VERSION)


def _verified_key(src: ModelSource, tok: LoadedTokenizer, where: dict[str, Any], batch_size: int) -> str:
    """The disk-store key of one model's verifications: its files (path, size, mtime), the tokenizer's bytes, the
    prompt templates, where the model runs (device, device map, memory caps: the dtype follows the device) and
    the batch size."""
    parts = {
        "model": src.fingerprint(),
        "tokenizer": tok.digest,
        "templates": TEMPLATES,
        "where": {k: where.get(k) for k in ("device", "device_map", "max_memory")},
        "batch_size": batch_size,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _stored_verification(doc: Any) -> Verification | None:
    """A verification read back from the store (its verdict recomputed from the stored probabilities), or None
    for anything that is not one."""
    try:
        prompts = [
            PromptResult(str(p["test_name"]), bool(p["encodeable"]), str(p["output"]), float(p["max_prob"]))
            for p in doc["prompts"]
        ]
        mp = float(doc["max_prob"])
        return Verification(int(doc["id"]), mp, verdict_for(mp, any(p.encodeable for p in prompts)), prompts)
    except (KeyError, TypeError, ValueError):
        return None


def verify_result(
    result: UndertrainedResult,
    model: str | ModelSource,
    tok: LoadedTokenizer,
    k: int,
    *,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: dict[Any, str] | None = None,
    batch_size: int = 8,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    lm: PlacedLM | tuple[Any, str] | Callable[[], PlacedLM] | None = None,
    include_references: bool = False,
) -> list[Verification]:
    """Verify the first `k` candidates of a result (stored in `result.verifications`); returns them.

    The model is placed by :func:`place_lm` (`device`, `device_map`, `max_memory`), or `lm` is one placed
    already (a :class:`PlacedLM`, or a bare ``(model, device)`` pair whose placement is not recorded), or a
    function placing it as `device`, `device_map` and `max_memory` say (called only when a candidate is missing
    from the store). Candidates are batched on the device holding the input embeddings.

    Verifications of the same model files, tokenizer and placement are kept in the disk store: candidates found
    there are read back (``timings["verify_stored"]`` counts them) and the model is loaded only for the others.
    `result.placement` records where the model went (for stored ones, where it went when they were computed) and
    `result.timings` the per-candidate cost (``verify_per_candidate``, seconds, of the candidates computed now).
    The reference tokens are skipped unless `include_references` (see `UndertrainedResult.verification_queue`).
    """
    src = model if isinstance(model, ModelSource) else resolve_model(model)
    if not result.has_lm_head:
        raise ModelLoadError(
            f"{src.label} has no LM head: verification is not possible (the indicators still work)"
        )
    t0 = time.perf_counter()
    plan = None
    if isinstance(lm, PlacedLM):
        where = lm.placement
    elif isinstance(lm, tuple):
        where = {"device": lm[1], "device_map": None, "max_memory": None}
    else:
        plan = plan_placement(src, device=device, device_map=device_map, max_memory=max_memory)
        where = plan.to_json()
    key = _verified_key(src, tok, where, batch_size)
    stored = _VERIFIED.get(key)
    stored = stored if isinstance(stored, dict) and isinstance(stored.get("verifications"), dict) else {}
    known = dict(stored.get("verifications", {}))
    todo = result.verification_queue(k, include_references=include_references)
    done: list[Verification] = []
    for i in todo:
        v = _stored_verification(known.get(str(i)))
        if v is not None and v.id == i:
            result.verifications[i] = v
            done.append(v)
    todo = [i for i in todo if i not in result.verifications]
    result.timings["verify_stored"] = len(done)
    if done:
        result.placement.update(stored.get("placement") or {})
        report(progress, len(done), len(done) + len(todo), "candidates read back from the disk store")
    if not todo:
        result.placement.setdefault("input_device", where.get("device"))
        return done
    if lm is None:
        lm = _place(src, plan)  # type: ignore[arg-type]
    elif callable(lm):
        lm = lm()
    if isinstance(lm, PlacedLM):
        result.placement.update(lm.placement)
        net, dev = lm.model, lm.device
    else:
        net, dev = lm
    t1 = time.perf_counter()
    ver = Verifier(net, tok, device=dev, round_trip=result.round_trip)
    placement_doc = {**result.placement, "input_device": dev}

    def keep(v: Verification) -> None:
        result.verifications[v.id] = v
        known[str(v.id)] = v.as_dict()

    try:
        out = ver.verify(
            todo, batch_size=batch_size, progress=progress, should_stop=should_stop, on_result=keep
        )
    finally:  # also what a stopped or failed run finished: the next run resumes from there
        if len(known) > len(stored.get("verifications", {})):
            _VERIFIED.put(key, {"placement": placement_doc, "verifications": known})
    result.timings["load_lm"] = t1 - t0
    result.timings["verify"] = time.perf_counter() - t1
    if out:
        result.timings["verify_per_candidate"] = result.timings["verify"] / len(out)
    result.placement["input_device"] = dev
    return done + out


def _device_map_summary(model: Any) -> dict[str, int] | None:
    """Number of modules accelerate put on each device (None when the model sits on one device)."""
    dm = getattr(model, "hf_device_map", None)
    if not dm or len(set(map(str, dm.values()))) < 2:
        return None
    out: dict[str, int] = {}
    for where in dm.values():
        out[str(where)] = out.get(str(where), 0) + 1
    return out


# --------------------------------------------------------------------------------------------------
# Token-health table (joined with STT)
# --------------------------------------------------------------------------------------------------
def stt_status(tok: LoadedTokenizer) -> dict[int, str]:
    """STT category per id from :func:`analysis.bpe.stt.stt_report` (reachable, unreachable_multi, special,
    …); {} for tokenizers the STT does not apply to (non-BPE)."""
    try:
        return {r.id: r.category for r in stt_report(tok).rows}
    except UnsupportedTokenizerError:
        return {}


def health_table(result: UndertrainedResult, stt: dict[int, str] | None = None) -> Any:
    """One row per token: indicators, rank, round-trip category, class, script, reference, verdict, STT."""
    import pandas as pd  # noqa: PLC0415 - pandas loads pyarrow (heavy); only the table needs it

    n = result.n_rows
    main = result.main_values
    order = np.argsort(main, kind="stable")
    pct = np.empty(n, dtype=np.float64)
    pct[order] = np.arange(n) / max(1, n)
    data: dict[str, Any] = {
        "id": np.arange(n),
        "token": result.tokens,
        "round_trip": [result.category(i) for i in range(n)],
        "class": [result.token_class(i) for i in range(n)],
        "script": [text_script(t) if i < result.n_tokens else "" for i, t in enumerate(result.tokens)],
    }
    for k, v in result.indicators.items():
        data[k] = v
    data["percentile"] = np.round(pct * 100, 3)
    refs = set(result.references.ids)
    data["reference"] = [i in refs for i in range(n)]
    cset = set(result.candidates)
    data["candidate"] = [i in cset for i in range(n)]
    data["max_prob"] = [
        result.verifications[i].max_prob if i in result.verifications else math.nan for i in range(n)
    ]
    data["verdict"] = [result.verifications[i].verdict if i in result.verifications else "" for i in range(n)]
    if stt is not None:
        data["stt"] = [stt.get(i, "n/a") for i in range(n)]
    return pd.DataFrame(data)


def indicators_for(
    model: str | ModelSource, tokenizer: LoadedTokenizer | None, ids: list[int]
) -> dict[int, dict[str, Any]]:
    """The main under-trained indicator of the tokens `ids` (e.g. the new tokens of an extended model): its
    value, the share of the model's tokens with a lower value (0 = the most under-trained-looking) and whether
    the token is a candidate (:func:`analyze` with its defaults)."""
    res = analyze(model, tokenizer)
    values = np.asarray(res.main_values[: res.n_tokens], dtype=np.float64)
    finite = np.sort(values[np.isfinite(values)])
    cands = set(res.candidates)
    out: dict[int, dict[str, Any]] = {}
    for i in ids:
        if not 0 <= i < res.n_tokens:
            continue
        v = float(values[i])
        out[i] = {
            "indicator": res.main,
            "value": v,
            "rank_share": float(np.searchsorted(finite, v) / max(len(finite), 1)),
            "candidate": i in cands,
        }
    return out
