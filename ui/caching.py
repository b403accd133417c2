"""Streamlit cache wrappers keyed by content: a `LoadedTokenizer` argument is hashed by its identity (content hash and settings), a
training `Corpus` by its fingerprint (one definition here, used by every page).

Only what the engine does not cache itself belongs in a page cache (the engine memoises vocabulary tables, STT
reports, vocabulary structures, replays, compression cells, Unicode classes…). Cached values are shared between
sessions: never mutate one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from analysis import LoadedTokenizer
from analysis.texts.corpora import Corpus


def _tokenizer_key(tok: LoadedTokenizer) -> str:
    return tok.identity


def _corpus_key(text: Corpus) -> str:
    return text.fingerprint


#: `hash_funcs` for st.cache_data / st.cache_resource: objects keyed by what they contain, never by identity.
HASH_FUNCS: dict[type, Callable[[Any], Any]] = {LoadedTokenizer: _tokenizer_key, Corpus: _corpus_key}


def cache_data(**kwargs: Any) -> Callable:
    """`st.cache_data` (a copy per caller) with the content-keyed `HASH_FUNCS`."""
    return st.cache_data(hash_funcs=HASH_FUNCS, **kwargs)


def cache_resource(**kwargs: Any) -> Callable:
    """`st.cache_resource` (one shared, read-only object) with the content-keyed `HASH_FUNCS`."""
    return st.cache_resource(hash_funcs=HASH_FUNCS, **kwargs)
