"""This browser session's tokenizer library and the sidebar that lists it.

The library is a dict name → `LoadedTokenizer` in `st.session_state`, so uploads and edited tokenizers never leak
into another session; shared loads come from `ui.loaders` (cached, immutable). The embedded default is always
there.
"""

from __future__ import annotations

import html
from pathlib import Path

import streamlit as st

from analysis import LoadedTokenizer
from analysis.defaults import DEFAULT_NAME
from analysis.export import library_zip
from analysis.sources import load_library_zip, load_upload
from ui.loaders import example_tokenizers, load_default, load_path_cached, load_source

LIBRARY_KEY = "toklab_library"
#: characters backslash-escaped in names shown as Markdown
MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-.!|~<>$")


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
    """The sidebar list of loaded tokenizers, with one-click examples and the library's save/restore."""
    lib = library()
    st.markdown("### Tokenizer library")
    for name, tok in list(lib.items()):
        c1, c2 = st.columns([5, 1])
        # names come from uploaded file names: escaped, so HTML in a name is shown as text
        c1.markdown(
            f"**{_escape(name)}**  \n<small>{tok.model_type} · {tok.vocab_size:,}</small>",
            unsafe_allow_html=True,
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
    save_and_restore()


def _escape(text: str) -> str:
    """Text for st.markdown with HTML allowed: HTML escaped, Markdown's special characters backslash-escaped."""
    out = html.escape(text, quote=True)
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in out)


def save_and_restore() -> None:
    """Save this session's library as a zip and restore one: uploads and edits live in this browser tab only."""
    st.caption(
        "Uploads and edited tokenizers live only in this browser tab: reloading the page or closing it loses "
        "them. Save the library as a zip (tokenizer.json files and their names) and restore it later."
    )
    with st.expander("Save or restore this library", expanded=False):
        if st.button("Prepare library zip", key="lib-save"):
            entries = {n: t for n, t in library().items() if n != DEFAULT_NAME}
            st.session_state["lib-zip"] = library_zip(entries) if entries else None
            if not entries:
                st.info("Only the embedded default is loaded: nothing to save.")
        if st.session_state.get("lib-zip"):
            st.download_button("Download library (.zip)", st.session_state["lib-zip"],
                               file_name="tokenizer-lab-library.zip", mime="application/zip", key="lib-dl")  # fmt: skip
        up = st.file_uploader("Restore a saved library (.zip)", type=["zip"], key="lib-restore")
        if up is not None and st.button("Restore", key="lib-restore-go"):
            names = [add_to_library(tok, name) for name, tok in load_library_zip(up.getvalue())]
            st.success(f"Restored {len(names)} tokenizer(s).")
