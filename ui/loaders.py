"""Shared loads: the embedded default, local folders/files and hub repositories, each loaded once per server into
the process-wide tokenizer LRU (`ui.memory.TOKENIZERS`, keyed by identity, byte-budgeted; a `LoadedTokenizer` is
immutable, so sessions share it). Uploads and edits enter the same LRU through `ui.library`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from analysis import AnalysisError, LoadedTokenizer
from analysis.core import paths
from analysis.core.cache import SingleFlight
from analysis.model.demo_models import DEMO_MODELS, weights_path
from analysis.tokenizer.defaults import default_tokenizer
from analysis.tokenizer.hub import load_hub
from analysis.tokenizer.sources import load
from ui.memory import keep, kept

#: Most (path, modification time) and hub requests whose tokenizer identity this process remembers.
MAX_NAMED = 256
#: (path, modification time) or (hub id, revision, token digest) → (identity, name, source) of what it loaded.
_NAMED: OrderedDict[tuple, tuple[str, str, str]] = OrderedDict()
_NAMED_LOCK = threading.Lock()
_FLIGHT = SingleFlight()  # two sessions asking for the same new file at once load it once


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


def load_default() -> LoadedTokenizer:
    """The embedded default tokenizer (shared, pinned in the LRU: every session's library holds it)."""
    return _through(("embedded",), default_tokenizer, pin=True)


def _through(request: tuple, loader: Callable[[], LoadedTokenizer], *, pin: bool = False) -> LoadedTokenizer:
    """What `request` loaded before, from the LRU; else `loader()`'s tokenizer, kept in the LRU."""
    with _NAMED_LOCK:
        known = _NAMED.get(request)
        if known is not None:
            _NAMED.move_to_end(request)
    if known is not None:
        tok = kept(*known)
        if tok is not None:
            return tok
    tok = _FLIGHT.run(request, lambda: keep(loader(), pin=pin))
    with _NAMED_LOCK:
        _NAMED[request] = (tok.identity, tok.name, tok.source)
        while len(_NAMED) > MAX_NAMED:
            _NAMED.popitem(last=False)
    return tok


def _load_path(path: str, mtime: float) -> LoadedTokenizer:
    return _through(("path", path, mtime), lambda: load(path))


def _load_hub(repo_id: str, revision: str | None, token: str | None) -> LoadedTokenizer:
    secret = hashlib.sha256(token.encode("utf-8")).hexdigest() if token else ""  # a token never kept as such
    return _through(
        ("hub", repo_id, revision, secret), lambda: load_hub(repo_id, revision=revision, token=token)
    )


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
