"""The defaults of dynamic tokenization, shared by the Dynamic tokenization page and `python -m analysis dynamic`
(docs/defaults.md).

Two differ on purpose, and the page's equivalent command states the page's values: the page starts at the word
boundary, the paper's granularity, while the command line keeps the boundary every pre-tokenizer guarantees
(pre-tokens); and the page starts at the merges its target reduction needs, the command line at
:data:`DEFAULT_MERGES`."""

from __future__ import annotations

#: The merge boundary of `dynamic` (and of :func:`analysis.methods.dynamic.dynamic_tokenize`).
DEFAULT_BOUNDARY = "pretokens"
#: The page's boundary: the paper merges within words.
PAGE_BOUNDARY = "word"
#: Most merges `dynamic` performs without --merges.
DEFAULT_MERGES = 100
#: The page's target reduction in percent (its merges start where the target is reached).
PAGE_TARGET = 10.0
#: FLORES lines in the batch (--n, the page's slider).
DEFAULT_N = 32
#: The page's FLORES language: most tokenizers split Estonian into many pieces, so there is much to merge.
PAGE_LANG = "est_Latn"
#: The page's batch size when it samples merges per batch (the command line: one batch unless --batch-size).
PAGE_BATCH_SIZE = 8
#: Seed of the sampled merge counts.
DEFAULT_SEED = 0
