"""Shared loads: the embedded default, local folders/files and hub repositories, each loaded once per server
through `st.cache_resource` (a `LoadedTokenizer` is immutable, so sessions can share it). Uploads and edited
tokenizers are per session and never pass through here (see `ui.library`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from analysis import AnalysisError, LoadedTokenizer
from analysis.core import paths
from analysis.model.demo_models import DEMO_MODELS, weights_path
from analysis.tokenizer.defaults import default_tokenizer
from analysis.tokenizer.hub import load_hub
from analysis.tokenizer.sources import load


def example_tokenizers() -> dict[str, Path]:
    """name → folder of every example tokenizer (sub-folders of TOKLAB_TOKENIZER_DIRS, else the shared assets)."""
    out: dict[str, Path] = {}
    for d in paths.tokenizer_dirs():
        for sub in sorted(d.iterdir()):
            if sub.is_dir() and any((sub / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
                out.setdefault(sub.name, sub)
    return out


def fetched_models() -> dict[str, Path]:
    """The demo models (`analysis.model.demo_models`) in the models folder, picker label → weights (fetched or not)."""
    return {f"{m.label.removesuffix(')')}, fetched)": weights_path(m) for m in DEMO_MODELS}


@st.cache_resource(show_spinner="Loading the embedded default tokenizer…")
def load_default() -> LoadedTokenizer:
    """The embedded default tokenizer (shared)."""
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
    try:
        files = list(p.iterdir()) if p.is_dir() else [p]
        mtime = max((f.stat().st_mtime for f in files), default=0.0)
    except OSError:
        return load(p)  # let the loader say what is wrong with the path
    return _load_path(str(p.resolve()), mtime)


def load_hub_cached(repo_id: str, revision: str | None = None, token: str | None = None) -> LoadedTokenizer:
    """Load from the hub through the shared cache (only the tokenizer files are fetched)."""
    return _load_hub(repo_id.strip(), (revision or "").strip() or None, token or None)


def load_source(source: str) -> LoadedTokenizer:
    """Load a shareable source string: `example:NAME`, `path:/dir`, `hub:owner/name[@rev]` or `embedded:`."""
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
        return load_default()
    raise AnalysisError(f"unknown tokenizer source {source!r}")
