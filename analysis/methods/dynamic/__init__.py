"""Dynamic tokenization: per-batch merging of the base tokenization (the batch's most frequent adjacent pairs
merged, tokens and offsets kept exact), sampled merge counts, and FVT embedding rows for a model.

===========  ======================================================================================
module       what lives there
===========  ======================================================================================
``dynamic``  the merge loop (incremental and naive), :class:`DynamicReport` (its one JSON document),
             sampled batches and the FVT rows of the merged tokens for a model
===========  ======================================================================================
"""

from __future__ import annotations

from .dynamic import (
    BatchEmbeddings,
    BatchRun,
    DynamicReport,
    DynamicResult,
    MergeStep,
    PairRules,
    SampledBatches,
    base_tokenize,
    batch_fvt_embeddings,
    check_batch_size,
    dynamic_batches,
    dynamic_tokenize,
    fvt_embeddings,
    merge_incremental,
    merge_naive,
    merged_ids,
    merged_offsets,
    readable_token,
    sampled_batches,
    special_frame,
)

__all__ = [
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
]
