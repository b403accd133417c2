"""The defaults of an SA-BPE run, shared by the SA-BPE page and `python -m analysis sabpe` (docs/defaults.md).

The page trains interactively on two shared cores, so it starts on a few languages, a few files per repository
and a small vocabulary; the command line reads every language and file unless told (--languages,
--max-files-per-repo) and asks for --vocab-size. The page's equivalent command states all three."""

from __future__ import annotations

#: Skip rule: pairs found in fewer repositories (the paper's R_t; 1 = off) and languages (L_t; 1 = off).
DEFAULT_MIN_SOURCES = 1
DEFAULT_MIN_LANGUAGES = 1
#: Variant of the parity-aware baseline.
DEFAULT_PARITY_VARIANT = "base"
#: The page's starting languages (the command line: every language of the corpus).
PAGE_LANGUAGES = ("python", "go", "rust", "javascript", "lua", "ruby")
#: The page's files per repository and language (the command line: all of them).
PAGE_FILES_PER_REPO = 3
#: The page's starting vocabulary size (the command line asks for --vocab-size).
PAGE_VOCAB_SIZE = 2000
