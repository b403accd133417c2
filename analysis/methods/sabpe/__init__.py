"""Source-attributed BPE (SA-BPE): BPE whose merges are scored by how many sources (repositories, languages) use
them, trained on source-attributed code records, compared with plain and parity-aware BPE.

=========  ==========================================================================================
module     what lives there
=========  ==========================================================================================
``sabpe``  per-source word counts, the source-attributed trainer, the tokenizer it builds, the code
           measures (three-digit numbers, identifier lengths, per-language compression) and
           :class:`SabpeComparison` (BPE vs SA-BPE vs parity-aware BPE, its one JSON document)
=========  ==========================================================================================
"""

from __future__ import annotations

from .sabpe import (
    ALPHABET,
    CONCENTRATION_THRESHOLD,
    DEFAULT_PRIORITY,
    DEFAULT_SPECIALS,
    PAPER_LANGUAGE_GINI,
    PRIORITIES,
    PRIORITY_HELP,
    RUN_LABELS,
    MergeRecord,
    SabpeComparison,
    SABPEResult,
    SkipRule,
    SourceWords,
    TrainState,
    build_tokenizer,
    collect_words,
    evaluate,
    identifier_lengths,
    language_compression,
    name_parts,
    normalize_priority,
    priority_function,
    records_by_language,
    require_byte_level,
    three_digit_numbers,
    tokenizer_metrics,
    train,
    train_parity_baseline,
    train_source_bpe,
)

__all__ = [
    "ALPHABET",
    "CONCENTRATION_THRESHOLD",
    "DEFAULT_PRIORITY",
    "DEFAULT_SPECIALS",
    "MergeRecord",
    "PAPER_LANGUAGE_GINI",
    "PRIORITIES",
    "PRIORITY_HELP",
    "RUN_LABELS",
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
