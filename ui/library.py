"""This workspace's tokenizer library and the sidebar that lists it.

The library is a dict name → :class:`~ui.memory.TokenizerRef` in `st.session_state`: references (identity,
name, where to load it again), never tokenizer objects, so a session holds no tokenizer memory of its own and
uploads and edits never leak into another session. :func:`library` resolves them through the server's one
byte-budgeted LRU (`ui.memory`), which loads an evicted entry again from its example folder, the hub cache or this
workspace's store. The embedded default is always there. Every entry added or removed is also written to the
session's workspace (`ui.workspace`), from which a new session with the same `?ws=` link restores the library.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from analysis import LoadedTokenizer
from analysis.core import paths
from analysis.errors import DataError
from analysis.tokenizer.defaults import DEFAULT_NAME
from analysis.tokenizer.export import library_zip
from analysis.tokenizer.sources import load_library_zip, load_upload
from ui import memory
from ui.expanders import lazy_expander
from ui.loaders import example_tokenizers, load_default, load_path_cached, load_source
from ui.memory import TokenizerRef, keep, reference, resolve
from ui.workspace import (
    current,
    forget_tokenizer,
    load_library_item,
    record_tokenizer,
    rename_tokenizer,
    restored_library,
)

LIBRARY_KEY = "toklab_library"
#: characters backslash-escaped in names shown as Markdown
MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-.!|~<>$")
_SELECT_NEXT = "toklab-select-next"
_RESET_EXAMPLE = "toklab-reset-example"
_RESTORED = "toklab-restored"

memory.RELOADERS["source"] = lambda ref: load_source(ref.origin)
memory.RELOADERS["ws:"] = lambda ref: load_library_item(ref.ws, ref.item)


def _refs() -> dict[str, TokenizerRef]:
    """This session's library as references, name → TokenizerRef (built from the workspace on the first call)."""
    refs = st.session_state.get(LIBRARY_KEY)
    if refs is None:
        refs = {DEFAULT_NAME: reference(load_default(), "embedded:")}
        ws = current()
        for n, t in restored_library():
            if n != DEFAULT_NAME:
                t = keep(t)
                refs[n] = reference(t, _shareable(t), ws, n)
        st.session_state[LIBRARY_KEY] = refs
    loose = [n for n, r in refs.items() if isinstance(r, LoadedTokenizer)]
    for (
        n
    ) in loose:  # a tokenizer object put here directly (tests do): kept in the LRU, replaced by a reference
        t = keep(refs[n])
        refs[n] = reference(t, _shareable(t))
    return refs


def library() -> dict[str, LoadedTokenizer]:
    """This session's tokenizers, name → LoadedTokenizer (the embedded default is always there): each from the
    server's shared LRU, loaded again if it was evicted. A fresh dict on every call; change the library with
    :func:`add_to_library`, :func:`remove_from_library` and :func:`rename_in_library`."""
    refs = _refs()
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is not None:
        memory.hold(ctx.session_id, (r.identity for r in refs.values()))
    return {name: resolve(ref) for name, ref in refs.items()}


def add_to_library(
    tok: LoadedTokenizer, name: str | None = None, *, upload: tuple[str, bytes, str | None] | None = None
) -> str:
    """Add a tokenizer under a unique name (the same tokenizer under the same name is not added twice) and keep it
    in the workspace (`upload`: the file name, bytes and tiktoken pattern it was converted from). The session keeps
    a reference; the object goes to the server's LRU (one per content: an upload of bytes another tab already
    loaded shares its object)."""
    refs = _refs()
    base = name or tok.name
    for existing, r in refs.items():
        if r.identity == tok.identity and existing == base:
            return existing
    final, k = base, 2
    while final in refs:
        final, k = f"{base} ({k})", k + 1
    tok = keep(tok)
    origin = _shareable(tok)
    stored = record_tokenizer(final, tok, origin, upload)
    refs[final] = reference(tok, origin, current() if stored else "", final)
    return final


def add_edited_button(tok: LoadedTokenizer, name: str, key: str, container: Any = None) -> str | None:
    """An "Add to library" button for an edited tokenizer (a new object: the original is never changed); once
    pressed, the tokenizer is in this session's library under a unique name, which is returned."""
    box = container or st
    if box.button("Add to library", key=key, icon=":material/library_add:",
                  help="Add the edited tokenizer to this session's library: every page's picker offers it"):  # fmt: skip
        added = add_to_library(tok.with_source(name=name, source="edited:"))
        box.success(f"Added **{_escape(added)}** to the library: pick it on the Playground, Compression, "
                    "Token health or any other page.")  # fmt: skip
        return added
    return None


def remove_from_library(name: str) -> None:
    """Forget a tokenizer in this session (the default stays)."""
    if name != DEFAULT_NAME and _refs().pop(name, None) is not None:
        forget_tokenizer(name)


#: File names that say nothing about whose tokenizer it is (`tokenizer.json`, `spiece.model`, `vocab.txt`…): an
#: upload of one is named with its model type and size, so that two uploads are told apart in every picker.
GENERIC_STEMS = frozenset({"tokenizer", "tokenizer_config", "vocab", "model", "spiece", "sentencepiece.bpe",
                           "sentencepiece", "tokenizer.model", "merges", "ranks"})  # fmt: skip


def upload_to_library(
    filename: str, data: bytes, tiktoken_pattern: str | None = None, name: str | None = None
) -> str:
    """Convert an uploaded file and add it to this session's library; returns its name: `name` when given, else
    the file's (a zip's: the folder's) name, with its model type and size when that name is a generic one."""
    tok = load_upload(filename, data, tiktoken_pattern=tiktoken_pattern)
    upload = (filename, data, tiktoken_pattern)  # the workspace keeps the file itself
    if name and name.strip():
        return add_to_library(tok.with_source(name=name.strip()), upload=upload)
    if tok.name.lower() in GENERIC_STEMS:
        return add_to_library(
            tok.with_source(name=f"{tok.name} ({tok.model_type}, {tok.vocab_size:,} tokens)"), upload=upload
        )
    return add_to_library(tok, upload=upload)


def rename_in_library(old: str, new: str) -> str:
    """Give a library entry another name (its place in the library and every picker's choice of it kept);
    returns the new name. DataError for the embedded default, an empty name or one already taken."""
    refs = _refs()
    new = new.strip()
    if old == DEFAULT_NAME:
        raise DataError("the embedded default keeps its name")
    if old not in refs:
        raise DataError(f"{old!r} is not in this session's library")
    if not new:
        raise DataError("give the new name")
    if new != old and new in refs:
        raise DataError(f"{new!r} is already the name of another tokenizer in this library")
    entries = [(new, r.renamed(new, new if r.item else "")) if n == old else (n, r) for n, r in refs.items()]
    refs.clear()
    refs.update(entries)
    rename_tokenizer(old, new)
    for key in list(st.session_state):  # the pickers that chose it (a selectbox's name, a multiselect's list)
        value = st.session_state[key]
        if str(key).startswith("toklab"):
            continue
        if value == old:
            st.session_state[key] = new
        elif isinstance(value, list) and old in value:
            st.session_state[key] = [new if v == old else v for v in value]
    return new


def source_of(name: str) -> str | None:
    """A shareable source string for a library entry (None for uploads and edits, which live in one workspace)."""
    ref = _refs().get(name)
    return None if ref is None or ref.origin == "ws:" else (ref.origin or None)


def _shareable(tok: LoadedTokenizer) -> str | None:
    """The shareable source string of a tokenizer (None for uploads and edits)."""
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


def shown_source(tok: LoadedTokenizer) -> str:
    """Where a tokenizer came from, as a browser user may see it: never an absolute server path (an example by
    name, a hub id, an upload or an edit, else the file or folder name only)."""
    src = tok.source or ""
    if src == "embedded" or src.startswith(("hub:", "upload:", "edited:")):
        return src
    for ex_name, folder in example_tokenizers().items():
        if src and Path(src).resolve() == folder.resolve():
            return f"example:{ex_name}"
    return f"a local file ({Path(src).name})" if src else "—"


def ensure_from_source(source: str) -> str:
    """The library name of a shareable source, loading it first if needed (raises AnalysisError on failure)."""
    for name in library():
        if source_of(name) == source:
            return name
    return add_to_library(load_source(source))


def request_selection(name: str) -> None:
    """Ask the page's tokenizer picker to select `name` on the next run (e.g. right after adding it)."""
    st.session_state[_SELECT_NEXT] = name


def take_selection() -> str | None:
    """The tokenizer a picker should select on this run (once; the first picker of the page takes it)."""
    name = st.session_state.pop(_SELECT_NEXT, None)
    return name if name in library() else None


def _entry(name: str, tok: LoadedTokenizer) -> None:
    """One library row: name, model type and size, and a remove button for everything but the default."""
    c1, c2 = st.columns([6, 1], vertical_alignment="center")
    # names come from uploaded file names: escaped, so HTML in a name is shown as text
    c1.markdown(
        f"**{_escape(name)}**  \n<small>{tok.model_type} · {tok.vocab_size:,} tokens</small>",
        unsafe_allow_html=True,
    )
    if name != DEFAULT_NAME and c2.button(
        "",
        icon=":material/delete:",
        type="tertiary",
        key=f"rm-{name}",
        help=f"Remove {name} from this session",
    ):
        remove_from_library(name)
        st.rerun()


def _add_example(examples: dict[str, Path]) -> None:
    """Pick an example and add it: a spinner with the elapsed time while it loads, then the current page's
    tokenizer picker selects it."""
    if st.session_state.pop(_RESET_EXAMPLE, False):
        st.session_state["sidebar-example"] = "—"
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    choice = c1.selectbox("Add an example", ["—", *examples], key="sidebar-example")
    if c2.button("Add", key="sidebar-add", disabled=choice == "—", help="Load it and select it on this page"):
        with st.spinner(f"Loading {choice}…", show_time=True):
            name = add_to_library(load_path_cached(examples[choice]).with_source(name=choice))
        request_selection(name)
        st.session_state[_RESET_EXAMPLE] = True
        st.rerun()


def sidebar_library() -> None:
    """The sidebar list of loaded tokenizers, with one-click examples and the library's save/restore (drawn
    after the page)."""
    st.session_state.pop(_SELECT_NEXT, None)  # a selection request lives for one run (pages without a picker)
    lib = library()
    st.markdown("### Tokenizer library")
    st.caption("This workspace's tokenizers: every page's picker offers them.")
    for name, tok in list(lib.items()):
        _entry(name, tok)
    examples = example_tokenizers()
    if examples:
        _add_example(examples)
    save_and_restore()


def _escape(text: str) -> str:
    """Text for st.markdown with HTML allowed: HTML escaped, Markdown's special characters backslash-escaped."""
    out = html.escape(text, quote=True)
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in out)


def save_and_restore() -> None:
    """Save this session's library as a zip and restore one: uploads and edits live in this browser tab only."""
    st.caption(
        "The library is kept in this tab's workspace on the server (see *Workspace* below). Save it as a zip "
        "(tokenizer.json files and their names) to keep a copy of your own, and restore it into any workspace."
    )
    box = lazy_expander("Save or restore this library", "lib-box")
    if box is None:  # closed: its uploader is not part of every page's first view
        return
    with box:
        if st.button("Prepare library zip", key="lib-save"):
            entries = {n: t for n, t in library().items() if n != DEFAULT_NAME}
            st.session_state["lib-zip"] = library_zip(entries) if entries else None
            if not entries:
                st.info("Only the embedded default is loaded: nothing to save.")
        if st.session_state.get("lib-zip"):
            st.download_button("Download library (.zip)", st.session_state["lib-zip"],
                               file_name="tokenizer-lab-library.zip", mime="application/zip", key="lib-dl")  # fmt: skip
        up = st.file_uploader(
            "Restore a saved library (.zip)",
            type=["zip"],
            key="lib-restore",
            max_upload_size=paths.upload_widget_mb(),
        )
        restored = st.session_state.pop(_RESTORED, None)
        if restored is not None:
            st.success(f"Restored {restored} tokenizer(s): every page's picker offers them.")
        if up is not None and st.button("Restore", key="lib-restore-go"):
            names = [add_to_library(tok, name) for name, tok in load_library_zip(up.getvalue())]
            st.session_state[_RESTORED] = len(names)
            st.rerun()  # the list above and the page's pickers were drawn before the restore
