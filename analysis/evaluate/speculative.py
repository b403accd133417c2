"""Speculative-decoding compatibility: may llama.cpp pair these two tokenizers' models as draft and target?

llama.cpp checks the two vocabularies before it drafts with one model for another (read in ggml-org/llama.cpp,
`common/speculative.cpp`, `common_speculative_are_compatible`, at commit
001d906a6d86e2490e394361e7cc6f478b100088; implemented here from that reading, not copied). In order, the pair is
refused when

1. the vocabulary types differ (`tokenizer.ggml.model`: gpt2 = byte-level BPE, llama = SentencePiece-style BPE,
   bert = WordPiece);
2. one adds a BOS token and the other does not, or both add one with different ids; the same for EOS;
3. the vocabulary sizes differ by more than :data:`SPEC_VOCAB_MAX_SIZE_DIFFERENCE` (128) tokens;
4. some id from :data:`SPEC_VOCAB_CHECK_START_TOKEN_ID` (5) on, below the smaller size, has another token text.

The vocabularies compared are the ones llama.cpp would read from each tokenizer's GGUF form
(:func:`analysis.tokenizer.gguf_export.gguf_vocab`: its token texts, types, BOS/EOS ids and add-BOS/add-EOS flags),
so the answer for a tokenizer.json is the answer for the GGUF this app writes from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.errors import DataError
from analysis.tokenizer.gguf_export import GgufVocab, gguf_model_kind, gguf_vocab
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: llama.cpp's largest difference in vocabulary size between a draft and its target (SPEC_VOCAB_MAX_SIZE_DIFFERENCE).
SPEC_VOCAB_MAX_SIZE_DIFFERENCE = 128
#: The first id whose token text llama.cpp compares (SPEC_VOCAB_CHECK_START_TOKEN_ID): ids 0–4 may differ.
SPEC_VOCAB_CHECK_START_TOKEN_ID = 5


@dataclass(frozen=True)
class SpeculativeCompatibility:
    """Whether llama.cpp accepts the pair for speculative decoding, and why (the first rule that refuses it)."""

    compatible: bool
    reason: str
    target_tokens: int | None = None
    draft_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """`{"compatible": bool, "reason": str, "target_tokens": …, "draft_tokens": …}`."""
        return {"compatible": self.compatible, "reason": self.reason, "target_tokens": self.target_tokens,
                "draft_tokens": self.draft_tokens}  # fmt: skip


def _vocab(tok: LoadedTokenizer) -> GgufVocab:
    # the pre-tokenizer name plays no part in the check: naming it spares identifying an unknown regex
    return gguf_vocab(tok, pre="default")


def _special(v: GgufVocab, key: str, add: bool) -> str:
    return f"add_{key}={str(add).lower()}" + (f", {key} id {v.special_ids.get(key)}" if add else "")


def vocab_compatibility(target: GgufVocab, draft: GgufVocab) -> SpeculativeCompatibility:
    """llama.cpp's four rules (see the module docstring) on two GGUF vocabularies."""
    nt, nd = len(target.tokens), len(draft.tokens)

    def no(reason: str) -> SpeculativeCompatibility:
        return SpeculativeCompatibility(False, reason, nt, nd)

    if target.model != draft.model:
        return no(f"vocabulary types differ: target {target.model}, draft {draft.model}")
    for key, add_t, add_d in (("bos", target.add_bos, draft.add_bos), ("eos", target.add_eos, draft.add_eos)):
        if add_t != add_d or (add_t and target.special_ids.get(key) != draft.special_ids.get(key)):
            return no(
                f"{key.upper()} differs: target {_special(target, key, add_t)}; draft {_special(draft, key, add_d)}"
            )
    diff = abs(nt - nd)
    if diff > SPEC_VOCAB_MAX_SIZE_DIFFERENCE:
        return no(f"vocabulary sizes differ by {diff:,} tokens (target {nt:,}, draft {nd:,}); llama.cpp allows at "
                  f"most {SPEC_VOCAB_MAX_SIZE_DIFFERENCE}")  # fmt: skip
    for i in range(SPEC_VOCAB_CHECK_START_TOKEN_ID, min(nt, nd)):
        if target.tokens[i] != draft.tokens[i]:
            return no(f"token {i} differs: target {target.tokens[i]!r}, draft {draft.tokens[i]!r}")
    return SpeculativeCompatibility(
        True,
        f"same vocabulary type ({target.model}), BOS/EOS and token texts from id {SPEC_VOCAB_CHECK_START_TOKEN_ID} "
        f"on; sizes differ by {diff} ≤ {SPEC_VOCAB_MAX_SIZE_DIFFERENCE}",
        nt,
        nd,
    )


def speculative_compatibility(target: LoadedTokenizer, draft: LoadedTokenizer) -> SpeculativeCompatibility:
    """Whether llama.cpp would pair models with these tokenizers as target and draft (e.g. an edited tokenizer and
    its original); a tokenizer with no GGUF form is not compatible, the reason says why."""
    try:
        vt, vd = _vocab(target), _vocab(draft)
    except DataError as e:
        return SpeculativeCompatibility(False, f"llama.cpp cannot read it: {e}")
    return vocab_compatibility(vt, vd)


def largest_compatible_extension(base: LoadedTokenizer) -> int:
    """The most tokens an extension that appends new ids after every existing one (as this app's extension
    methods do) may add and keep the extended tokenizer and `base` a valid draft/target pair: ids below the
    old size keep their text, so only the size rule binds — :data:`SPEC_VOCAB_MAX_SIZE_DIFFERENCE`; 0 when
    llama.cpp cannot read `base`."""
    try:
        gguf_model_kind(
            base
        )  # a tokenizer llama.cpp reads is compatible with itself: only the size rule is left
    except DataError:
        return 0
    return SPEC_VOCAB_MAX_SIZE_DIFFERENCE
