"""This browser session's tokenizer library and the sidebar that lists it.

The library is a dict name → `LoadedTokenizer` in `st.session_state`, so uploads and edited tokenizers never leak
into another session; shared loads come from `ui.loaders` (cached, immutable). The embedded default is always
there.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from analysis import LoadedTokenizer
from analysis.defaults import DEFAULT_NAME
from analysis.sources import load_upload
from ui.loaders import example_tokenizers, load_default, load_path_cached, load_source

LIBRARY_KEY = "toklab_library"


def library() -> dict[str, LoadedTokenizer]:
    """This session's tokenizers, name → LoadedTokenizer (the embedded default is always there)."""
    lib = st.session_state.get(LIBRARY_KEY)
    if lib is None:
        lib = {DEFAULT_NAME: load_default()}
        st.session_state[LIBRARY_KEY] = lib
    return lib


def add_to_library(tok: LoadedTokenizer, name: str | None = None) -> str:
    """Add a tokenizer under a unique name (the same tokenizer under the same name is not added twice)."""
    lib = library()
    base = name or tok.name
    for existing, t in lib.items():
        if t is tok or (t.content_hash == tok.content_hash and existing == base):
            return existing
    final, k = base, 2
    while final in lib:
        final, k = f"{base} ({k})", k + 1
    lib[final] = tok
    return final


def remove_from_library(name: str) -> None:
    """Forget a tokenizer in this session (the default stays)."""
    if name != DEFAULT_NAME:
        library().pop(name, None)


def upload_to_library(filename: str, data: bytes, tiktoken_pattern: str | None = None) -> str:
    """Convert an uploaded file and add it to this session's library; returns its name."""
    return add_to_library(load_upload(filename, data, tiktoken_pattern=tiktoken_pattern))


def source_of(name: str) -> str | None:
    """A shareable source string for a library entry (None for uploads and edits, which live in one session)."""
    tok = library().get(name)
    if tok is None:
        return None
    src = tok.source or ""
    if src == "embedded":
        return "embedded:"
    if src.startswith("hub:"):
        return src
    if src.startswith(("upload:", "edited:")):
        return None
    for ex_name, folder in example_tokenizers().items():
        if Path(src).resolve() == folder.resolve():
            return f"example:{ex_name}"
    if src and Path(src).exists():
        return f"path:{src}"
    return None


def ensure_from_source(source: str) -> str:
    """The library name of a shareable source, loading it first if needed (raises AnalysisError on failure)."""
    for name in library():
        if source_of(name) == source:
            return name
    return add_to_library(load_source(source))


def sidebar_library() -> None:
    """The sidebar list of loaded tokenizers, with one-click examples."""
    lib = library()
    st.markdown("### Tokenizer library")
    for name, tok in list(lib.items()):
        c1, c2 = st.columns([5, 1])
        c1.markdown(
            f"**{name}**  \n<small>{tok.model_type} · {tok.vocab_size:,}</small>", unsafe_allow_html=True
        )
        if name != DEFAULT_NAME and c2.button(":material/close:", key=f"rm-{name}", help=f"Remove {name}"):
            remove_from_library(name)
            st.rerun()
    ex = example_tokenizers()
    if ex:
        choice = st.selectbox("Add an example", ["—"] + list(ex), key="sidebar-example")
        if choice != "—" and st.button("Add", key="sidebar-add"):
            add_to_library(load_path_cached(ex[choice]).with_source(name=choice))
            st.rerun()
