"""Extend a tokenizer with new tokens: continued BPE training vs naive extension.

Purason, Chizhov, Yamshchikov & Fishel, *Teaching Old Tokenizers New Words: Efficient Tokenizer Adaptation for
Pre-trained Models* (arXiv 2512.03989, 2025), §3.1.

=============  ===========================================================================================
module         what lives there
=============  ===========================================================================================
``methods``    the methods (``continued``, ``regen``, ``merges``, ``add-tokens``, ``wordpiece``): the
               :class:`Extension` result, appending tokens and merges to a tokenizer.json, the auxiliary
               tokenizer of the naive baselines, regenerated merges
``plan``       :class:`Plan`: one training run / auxiliary vocabulary → any prefix 1..N; :func:`plan`,
               :func:`extend`
``simulator``  :class:`PrefixSimulator`: a prefix measured on fixed texts without building the tokenizer
               (appended merges through the replay's merge loop), the simulated STT of new tokens, the
               English tokenization change
``preview``    :class:`Preview`: every method at any n, for the Extend page
``report``     :class:`ExtendResult`: one run and its one JSON document (CLI, page export); held-out bytes/token
               and characters per 2,048 tokens
``balance``    :func:`compare_parity`: the parity-aware auxiliary tokenizer of the naive methods vs the plain
               one on FLORES held-out lines
``defaults``   the defaults the Extend page and `extend` share (method, minimum frequency, init, the page's
               N and character budget, the held-out texts' names)
``model``      :func:`export_extension`: the tokenizer folder, with the model's embeddings and LM head
               grown to the new vocabulary (FVT, mean or multivariate-normal rows)
=============  ===========================================================================================
"""

from .balance import compare_parity, parity_auxiliaries, parity_text
from .defaults import (
    DEFAULT_INIT,
    DEFAULT_METHOD,
    DEFAULT_MIN_FREQUENCY,
    PAGE_MAX_CHARS,
    PAGE_N,
    default_corpora,
    heldout_label,
)
from .methods import (
    METHOD_LABELS,
    METHODS,
    AuxVocab,
    Extension,
    ParityText,
    added_token_contents,
    append_to_model,
    aux_new_tokens,
    extend_add_tokens,
    extend_regen,
    extend_wordpiece,
    filter_merges,
    methods_for,
    next_id,
    parity_applies,
    regen_merges,
    train_auxiliary,
    train_auxiliary_for,
    train_wordpiece_supplement,
)
from .model import export_extension, grow_model
from .plan import PARITY_CONTINUED, Plan, extend, plan
from .preview import Preview
from .report import CONTEXT_TOKENS, ExtendResult, chars_per_context, heldout_measures, unreachable_added
from .simulator import (
    ADDED_MARK,
    PrefixSimulator,
    levenshtein,
    simulated_unreachable,
    stt_model_tokenize,
    tokenization_change,
)

__all__ = [
    "DEFAULT_INIT",
    "DEFAULT_METHOD",
    "DEFAULT_MIN_FREQUENCY",
    "PAGE_MAX_CHARS",
    "PAGE_N",
    "default_corpora",
    "heldout_label",
    "ADDED_MARK",
    "CONTEXT_TOKENS",
    "PARITY_CONTINUED",
    "ExtendResult",
    "ParityText",
    "chars_per_context",
    "compare_parity",
    "parity_auxiliaries",
    "parity_text",
    "heldout_measures",
    "parity_applies",
    "train_wordpiece_supplement",
    "METHODS",
    "METHOD_LABELS",
    "AuxVocab",
    "Extension",
    "Plan",
    "PrefixSimulator",
    "Preview",
    "added_token_contents",
    "append_to_model",
    "aux_new_tokens",
    "extend",
    "extend_add_tokens",
    "extend_regen",
    "extend_wordpiece",
    "export_extension",
    "grow_model",
    "filter_merges",
    "levenshtein",
    "methods_for",
    "next_id",
    "plan",
    "regen_merges",
    "simulated_unreachable",
    "stt_model_tokenize",
    "tokenization_change",
    "train_auxiliary",
    "train_auxiliary_for",
    "unreachable_added",
]
