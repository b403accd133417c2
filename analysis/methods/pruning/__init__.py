"""Vocabulary pruning: pruning orders, removal that keeps the tokenizer valid, curves, prune+extend.

After Purason, Chizhov, Yamshchikov, Fishel, "Teaching Old Tokenizers New Words: Efficient Tokenizer Adaptation
for Pre-trained Models" (arXiv 2512.03989, 2025), §3.2 and App. A. An *order* lists model-vocabulary ids,
first = pruned first; pruning N tokens removes the first N.

============================  =================================================================================
module                        what it holds
============================  =================================================================================
:mod:`.common`                supported tokenizers (:func:`check_prunable`), ids never pruned
                              (:func:`protected_ids`), text mixes (:func:`mix_texts`, :func:`flores_mix`),
                              :func:`token_counts`
:mod:`.orders`                :class:`PruneOrder` and every order (last-N, frequency, leaf last-N, leaf
                              frequency = Alg. 1, merge-based = Alg. 2, script, score); :func:`compute_order`
:mod:`.removal`               :func:`prune` / :class:`Pruner` (drop merges, renumber, fix added tokens and the
                              post-processor), :class:`PruneResult`
:mod:`.curves`                :func:`prune_curve`: bytes/token and STT-unreachable count for many N at once
:mod:`.prune_extend`          :func:`prune_then_extend`, :func:`extend_then_prune` (constant vocabulary size)
:mod:`.stored`                :func:`stored_order`: an order kept in the disk store, keyed by content and inputs
============================  =================================================================================

Bytes/token is :func:`analysis.measure.corpus_counts.bytes_per_token`, the STT count
:func:`analysis.bpe.stt.unreachable_ids` (both re-exported here for the Prune page and command).
"""

from __future__ import annotations

from analysis.bpe import unreachable_ids
from analysis.measure.corpus_counts import bytes_per_token

from .common import (
    FIRST_VIEW_LANGUAGES,
    FIRST_VIEW_ORDER,
    FIRST_VIEW_SCRIPTS,
    FIRST_VIEW_TRAIN_LINES,
    alphabet_ids,
    check_prunable,
    flores_mix,
    mix_texts,
    post_processor_tokens,
    protected_ids,
    token_counts,
)
from .curves import CurvePoint, curve_points, prune_curve
from .orders import (
    CORPUS_ORDERS,
    ORDER_DESCRIPTIONS,
    ORDER_LABELS,
    ORDER_REGISTRY,
    ORDERS,
    STRUCTURE_SAFE_ORDERS,
    PruneOrder,
    compute_order,
    frequency_order,
    last_n_order,
    leaf_frequency_order,
    leaf_last_n_order,
    leaf_order,
    merge_based_order,
    merge_counts,
    score_order,
    script_order,
)
from .prune_extend import PruneExtendResult, extend_then_prune, prune_then_extend
from .removal import Pruner, PruneResult, prune, prune_by_order
from .stored import ORDER_STORE_VERSION, order_key, stored_order

__all__ = [
    "CORPUS_ORDERS",
    "FIRST_VIEW_LANGUAGES",
    "FIRST_VIEW_ORDER",
    "FIRST_VIEW_SCRIPTS",
    "FIRST_VIEW_TRAIN_LINES",
    "ORDER_STORE_VERSION",
    "ORDERS",
    "ORDER_DESCRIPTIONS",
    "ORDER_LABELS",
    "ORDER_REGISTRY",
    "STRUCTURE_SAFE_ORDERS",
    "CurvePoint",
    "PruneExtendResult",
    "PruneOrder",
    "PruneResult",
    "Pruner",
    "alphabet_ids",
    "bytes_per_token",
    "check_prunable",
    "compute_order",
    "curve_points",
    "extend_then_prune",
    "frequency_order",
    "last_n_order",
    "leaf_frequency_order",
    "order_key",
    "stored_order",
    "leaf_last_n_order",
    "leaf_order",
    "merge_based_order",
    "merge_counts",
    "flores_mix",
    "mix_texts",
    "post_processor_tokens",
    "protected_ids",
    "prune",
    "prune_by_order",
    "prune_curve",
    "prune_then_extend",
    "score_order",
    "script_order",
    "token_counts",
    "unreachable_ids",
]
