"""Token reuse (R-BPE): replace the tokens a target language never uses with target-language tokens trained on
its text, keeping the vocabulary size and every other id, so the model's embedding matrix keeps its shape.

============  =====================================================================================
module        what lives there
============  =====================================================================================
``classes``   the vocabulary classes by Unicode block (`paper` / `unicode17` rules) and the choice of
              reusable classes (:class:`ReusePlan`)
``segments``  the target-script characters: block regexes, the target segments of a text, a
              language's role (target, reused, kept)
``protect``   the protections (`symbols`, `usage`): ids kept although their class is reusable
``target``    the target BPE's training texts, the target BPE and the id maps
``reuse``     :class:`ReuseTokenizer` (encode, save/load) and :func:`build_reuse_tokenizer` (the
              whole pipeline in one call)
``decoding``  how a :class:`ReuseTokenizer` decodes (runs of mapped / unmapped ids, the window pass)
``measures``  fertility/premium before and after, collateral damage on other languages,
              :class:`ReuseReport` (its one JSON document)
``model``     the model follows the ids: reused embedding rows re-initialised by FVT
============  =====================================================================================
"""

from __future__ import annotations

from .classes import (
    CJK_ALIASES,
    CJK_KEYWORDS,
    DEFAULT_RULES,
    DEMO_LANGS,
    KANA,
    KATAKANA_HIRAGANA,
    MERGED_FAMILIES,
    NON_SCRIPTS,
    PAPER_BLOCKS,
    PAPER_SCRIPT_KEYWORDS,
    REPLACEMENT,
    RULES,
    UNKNOWN,
    ReusePlan,
    VocabClasses,
    block_label,
    check_rules,
    choose_reusable,
    class_name,
    classify_vocab,
    in_paper_table,
    is_eligible,
    label_blocks,
    preserved_keywords,
    script_blocks,
    script_names,
    standalone_text,
    text_labels,
)
from .measures import (
    EXAMPLE_CHARS,
    SPLITS,
    TABLE2_LANGS,
    ReuseReport,
    collateral,
    collateral_summary,
    compare,
    fertility_by_class,
    measure_reuse,
    reused_script_demo,
)
from .model import MODEL_REPORT, export_model, read_model_report, reinit_reused_rows, reused_pieces
from .protect import (
    PROTECTIONS,
    all_shared_symbol_ids,
    is_shared_symbol,
    protected_ids,
    shared_symbol_ids,
    usage_ids,
)
from .reuse import FORMAT, MAPPING_FILE, ReuseTokenizer, build_reuse_tokenizer
from .segments import char_class, language_role, segment, target_regex
from .target import (
    NON_UTF8_BYTES,
    TRAINERS,
    build_id_maps,
    clean_texts,
    corpus_files,
    target_training_texts,
    train_target_bpe,
    utf8_alphabet,
    wordfreq_texts,
)

__all__ = [
    "CJK_ALIASES",
    "CJK_KEYWORDS",
    "DEFAULT_RULES",
    "DEMO_LANGS",
    "EXAMPLE_CHARS",
    "FORMAT",
    "KANA",
    "KATAKANA_HIRAGANA",
    "MAPPING_FILE",
    "NON_UTF8_BYTES",
    "MERGED_FAMILIES",
    "MODEL_REPORT",
    "NON_SCRIPTS",
    "PAPER_BLOCKS",
    "PAPER_SCRIPT_KEYWORDS",
    "PROTECTIONS",
    "REPLACEMENT",
    "RULES",
    "ReusePlan",
    "ReuseReport",
    "ReuseTokenizer",
    "SPLITS",
    "TABLE2_LANGS",
    "TRAINERS",
    "UNKNOWN",
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
    "all_shared_symbol_ids",
    "shared_symbol_ids",
    "standalone_text",
    "target_regex",
    "target_training_texts",
    "text_labels",
    "train_target_bpe",
    "usage_ids",
    "utf8_alphabet",
    "wordfreq_texts",
]
