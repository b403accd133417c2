"""The BPE engine: replay, merge trees, the Self-Tokenization Test, vocabulary structure and the trainer core.

==================  ===================================================================================
module              what lives there
==================  ===================================================================================
``replay``          :class:`BPEReplay` (step-wise re-implementation of the `tokenizers` BPE model, exact),
                    :func:`get_replay`, the merge loop :func:`merge_ids` (also over an extra rank table,
                    :class:`MergeTable`: merges appended to a base model), the merge list as id arrays and
                    pair → rank maps, and the one "requires BPE" check :func:`require_bpe`
``trees``           :func:`merge_tree` (how BPE builds a token from its own string), merge candidates,
                    tree walking, cutting and layout
``stt``             the Self-Tokenization Test: reachability mask, categorised report, counts,
                    :func:`explain_unreachable`, tokens never produced on a corpus
``structure``       :func:`vocabulary_structure`: final merge, depth, atomics, leaves, downstream counts,
                    dead merges (memory and disk cached)
``trainer``         the one incremental BPE trainer over word types, with two pair-statistics plug-ins:
                    plain frequency and source-attributed (F, R, L; priorities and skip rules)
==================  ===================================================================================

Dependencies run one way: ``replay`` ← ``trees`` ← ``stt`` ← ``structure``; ``trainer`` stands alone.
The public names below are re-exported here, so ``from analysis.bpe import merge_tree`` works.
"""

from .replay import (
    BPEReplay,
    MergeEvent,
    MergeTable,
    SortedPairs,
    fold_merges,
    get_replay,
    merge_arrays,
    merge_id_lists,
    merge_ids,
    pair_ranks,
    pair_stride,
    require_bpe,
)
from .structure import VocabStructure, vocabulary_structure
from .stt import (
    CATEGORIES,
    CATEGORY_HELP,
    NeverProduced,
    STTReport,
    STTResult,
    STTRow,
    STTRun,
    bare_tokenize_fn,
    corpus_token_counts,
    explain_unreachable,
    never_produced,
    never_produced_from_counts,
    reachable_mask,
    self_tokenize,
    self_tokenize_status,
    stt_counts,
    stt_report,
    stt_result,
    stt_tokenize_fn,
    unreachable_ids,
)
from .trainer import FrequencyStats, Pop, SkipRule, SourceStats, TrainRun, learn
from .trees import collapse_tree, iter_tree, layout_forest, merge_candidates_for, merge_tree, tree_depth

__all__ = [
    "CATEGORIES",
    "CATEGORY_HELP",
    "BPEReplay",
    "FrequencyStats",
    "MergeEvent",
    "MergeTable",
    "Pop",
    "STTReport",
    "STTResult",
    "STTRow",
    "STTRun",
    "NeverProduced",
    "SkipRule",
    "SortedPairs",
    "SourceStats",
    "TrainRun",
    "VocabStructure",
    "bare_tokenize_fn",
    "collapse_tree",
    "corpus_token_counts",
    "explain_unreachable",
    "fold_merges",
    "get_replay",
    "iter_tree",
    "learn",
    "layout_forest",
    "merge_arrays",
    "merge_candidates_for",
    "merge_id_lists",
    "merge_ids",
    "merge_tree",
    "never_produced",
    "never_produced_from_counts",
    "pair_ranks",
    "pair_stride",
    "reachable_mask",
    "require_bpe",
    "self_tokenize",
    "self_tokenize_status",
    "stt_counts",
    "stt_report",
    "stt_result",
    "stt_tokenize_fn",
    "tree_depth",
    "unreachable_ids",
    "vocabulary_structure",
]
