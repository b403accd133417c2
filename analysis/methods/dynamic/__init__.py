"""Dynamic tokenization: per-batch merging of the base tokenization (the batch's most frequent adjacent pairs
merged, tokens and offsets kept exact), sampled merge counts, and FVT embedding rows for a model.

===========  ======================================================================================
module       what lives there
===========  ======================================================================================
``dynamic``  the merge rules, the merge loop (incremental and naive), sampled merge counts per batch
``report``   :class:`DynamicResult` and :class:`DynamicReport` (the one JSON document)
``model``    the FVT rows of the merged tokens for a model, their cost and export
===========  ======================================================================================
"""

from __future__ import annotations

from .dynamic import (
    BOUNDARIES,
    FULL_CURVE_MERGES,
    FULL_MERGES,
    MAX_BATCH_CHARS,
    MAX_TEXT_CHARS,
    BatchRun,
    PairRules,
    SampledBatches,
    base_tokenize,
    check_batch_size,
    dynamic_batches,
    dynamic_tokenize,
    merge_incremental,
    merge_naive,
    merged_ids,
    merged_offsets,
    readable_token,
    sampled_batches,
    special_frame,
    tokens_concatenate,
)
from .model import (
    BatchEmbeddings,
    batch_fvt_embeddings,
    fvt_embeddings,
)
from .report import (
    DynamicReport,
    DynamicResult,
    MergeStep,
)

__all__ = [
    "BOUNDARIES",
    "FULL_CURVE_MERGES",
    "FULL_MERGES",
    "MAX_BATCH_CHARS",
    "MAX_TEXT_CHARS",
    "BatchEmbeddings",
    "BatchRun",
    "DynamicReport",
    "DynamicResult",
    "MergeStep",
    "PairRules",
    "SampledBatches",
    "base_tokenize",
    "batch_fvt_embeddings",
    "check_batch_size",
    "dynamic_batches",
    "dynamic_tokenize",
    "fvt_embeddings",
    "merge_incremental",
    "merge_naive",
    "merged_ids",
    "merged_offsets",
    "readable_token",
    "sampled_batches",
    "special_frame",
    "tokens_concatenate",
]
