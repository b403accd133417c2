"""Token reuse (R-BPE): replace the tokens a target language never uses with target-language tokens trained on
its text, keeping the vocabulary size and every other id, so the model's embedding matrix keeps its shape.

============  =====================================================================================
module        what lives there
============  =====================================================================================
``reuse``     classifying the vocabulary by script, choosing the reusable ids, the target BPE, the id
              maps and :class:`ReuseTokenizer` (encode/decode, save/load)
``measures``  fertility/premium before and after, collateral damage on other languages,
              :class:`ReuseReport` (its one JSON document)
``model``     the model follows the ids: reused embedding rows re-initialised by FVT
============  =====================================================================================
"""

from __future__ import annotations

from .measures import (
    ReuseReport,
    collateral,
    collateral_summary,
    compare,
    fertility_by_class,
    measure_reuse,
    reused_script_demo,
)
from .model import (
    export_model,
    read_model_report,
    reinit_reused_rows,
    reused_pieces,
)
from .reuse import (
    ReusePlan,
    ReuseTokenizer,
    VocabClasses,
    block_label,
    build_id_maps,
    build_reuse_tokenizer,
    char_class,
    check_rules,
    choose_reusable,
    class_name,
    classify_vocab,
    clean_texts,
    corpus_files,
    in_paper_table,
    is_eligible,
    is_shared_symbol,
    label_blocks,
    language_role,
    preserved_keywords,
    protected_ids,
    script_blocks,
    script_names,
    segment,
    shared_symbol_ids,
    standalone_text,
    target_regex,
    target_training_texts,
    text_labels,
    train_target_bpe,
    usage_ids,
    wordfreq_texts,
)

__all__ = [
    "ReusePlan",
    "ReuseReport",
    "ReuseTokenizer",
    "VocabClasses",
    "block_label",
    "build_id_maps",
    "build_reuse_tokenizer",
    "char_class",
    "check_rules",
    "choose_reusable",
    "class_name",
    "classify_vocab",
    "clean_texts",
    "collateral",
    "collateral_summary",
    "compare",
    "corpus_files",
    "export_model",
    "fertility_by_class",
    "in_paper_table",
    "is_eligible",
    "is_shared_symbol",
    "label_blocks",
    "language_role",
    "measure_reuse",
    "preserved_keywords",
    "protected_ids",
    "read_model_report",
    "reinit_reused_rows",
    "reused_pieces",
    "reused_script_demo",
    "script_blocks",
    "script_names",
    "segment",
    "shared_symbol_ids",
    "standalone_text",
    "target_regex",
    "target_training_texts",
    "text_labels",
    "train_target_bpe",
    "usage_ids",
    "wordfreq_texts",
]
