"""Source-attributed BPE (SA-BPE): BPE whose merges are scored by how many sources (repositories, languages) use
them, trained on source-attributed code records, compared with plain and parity-aware BPE.

============  =======================================================================================
module        what lives there
============  =======================================================================================
``sabpe``     per-source word counts, the source-attributed trainer, the tokenizer it builds, the
              parity-aware baseline
``measures``  the code measures: three-digit numbers, identifier lengths, per-language compression
``report``    :class:`SabpeComparison` (BPE vs SA-BPE vs parity-aware BPE, its one JSON document)
``corpus``    the per-source word counts as a corpus statistic for the corpus jobs
============  =======================================================================================
"""

from __future__ import annotations

from .measures import (
    LONG_NAME_PARTS,
    PAPER_LANGUAGE_GINI,
    THREE_DIGIT_MAX,
    evaluate,
    identifier_lengths,
    language_compression,
    name_parts,
    three_digit_numbers,
    tokenizer_metrics,
)
from .report import (
    RUN_LABELS,
    SabpeComparison,
)
from .sabpe import (
    ALPHABET,
    CONCENTRATION_THRESHOLD,
    DEFAULT_PRIORITY,
    DEFAULT_SPECIALS,
    PRIORITIES,
    PRIORITY_HELP,
    MergeRecord,
    SABPEResult,
    SkipRule,
    SourceWords,
    TrainState,
    build_tokenizer,
    collect_words,
    normalize_priority,
    priority_function,
    records_by_language,
    require_byte_level,
    train,
    train_parity_baseline,
    train_source_bpe,
)

__all__ = [
    "ALPHABET",
    "CONCENTRATION_THRESHOLD",
    "DEFAULT_PRIORITY",
    "DEFAULT_SPECIALS",
    "LONG_NAME_PARTS",
    "MergeRecord",
    "PAPER_LANGUAGE_GINI",
    "PRIORITIES",
    "PRIORITY_HELP",
    "RUN_LABELS",
    "SABPEResult",
    "SabpeComparison",
    "SkipRule",
    "SourceWords",
    "THREE_DIGIT_MAX",
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
