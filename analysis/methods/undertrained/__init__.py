"""Under-trained tokens from a model's own weights.

After Land & Bartolo, "Fishing for Magikarp: Automatically Detecting Under-trained Tokens in Large Language
Models" (EMNLP 2024). Implemented from the paper; no code from the (unlicensed) magikarp repository.

Pipeline: read the embedding matrices (:mod:`analysis.model.weights`) → round-trip categories → reference tokens that
are known to be untrained → indicators → candidates (the lowest percentile among tokens that round-trip) →
verification with three repeat prompts → token classes and a token-health table joined with the STT.

=====================  ========================================================================================
module                 what it holds
=====================  ========================================================================================
:mod:`.roundtrip`      round-trip categories (:func:`round_trip_categories`, OK, UNDECODEABLE, …), special ids
:mod:`.references`     reference tokens: :func:`auto_references`, :func:`user_references`,
                       :func:`parse_reference_spec`
:mod:`.indicators`     :func:`compute_indicators` (input norm, cosine / L2 distance to the reference mean, PC1
                       removed), :func:`first_principal_component`, :func:`select_candidates`
:mod:`.classes`        rule-based token classes (:func:`token_class`)
:mod:`.verification`   :func:`load_lm` (through :func:`analysis.model.models.load_causal_lm`), :class:`Verifier`,
                       :func:`verdict_for`
:mod:`.report`         :func:`analyze`, :func:`place_lm` (:class:`PlacedLM`), :func:`verify_result`,
                       :class:`UndertrainedResult` (``to_json()``: the CLI's JSON and the page's download),
                       :func:`indicators_for` (the indicator of chosen ids, e.g. an extension's new tokens),
                       :func:`health_table`, :func:`stt_status`
=====================  ========================================================================================
"""

from __future__ import annotations

from analysis.model.models import cuda_available, parse_max_memory, pick_device

from .classes import TOKEN_CLASSES, token_class
from .indicators import (
    INDICATOR_LABELS,
    compute_indicators,
    default_main_indicator,
    duplicate_row_groups,
    first_principal_component,
    row_norms,
    select_candidates,
)
from .references import (
    INVALID_UTF8_BYTES,
    References,
    auto_references,
    parse_reference_spec,
    user_references,
)
from .report import (
    PlacedLM,
    UndertrainedResult,
    analyze,
    check_percentile,
    health_table,
    indicators_for,
    ordinal,
    place_lm,
    stt_status,
    verify_result,
)
from .roundtrip import (
    MISSING,
    OK,
    OK_SPECIAL,
    PADDING_ROW,
    ROUND_TRIP_CATEGORIES,
    UNDECODEABLE,
    UNREACHABLE_MULTI,
    UNREACHABLE_SINGLE,
    UNREACHABLE_SPECIAL,
    RoundTrip,
    round_trip_categories,
    special_ids,
)
from .verification import TEMPLATES, PromptResult, Verification, Verifier, load_lm, verdict_for

__all__ = [
    "indicators_for",
    "INDICATOR_LABELS",
    "INVALID_UTF8_BYTES",
    "MISSING",
    "OK",
    "OK_SPECIAL",
    "PADDING_ROW",
    "ROUND_TRIP_CATEGORIES",
    "TEMPLATES",
    "TOKEN_CLASSES",
    "UNDECODEABLE",
    "UNREACHABLE_MULTI",
    "UNREACHABLE_SINGLE",
    "UNREACHABLE_SPECIAL",
    "PlacedLM",
    "PromptResult",
    "References",
    "RoundTrip",
    "UndertrainedResult",
    "Verification",
    "Verifier",
    "analyze",
    "check_percentile",
    "cuda_available",
    "auto_references",
    "compute_indicators",
    "default_main_indicator",
    "duplicate_row_groups",
    "first_principal_component",
    "health_table",
    "load_lm",
    "ordinal",
    "parse_max_memory",
    "parse_reference_spec",
    "pick_device",
    "place_lm",
    "round_trip_categories",
    "row_norms",
    "select_candidates",
    "special_ids",
    "stt_status",
    "token_class",
    "user_references",
    "verdict_for",
    "verify_result",
]
