"""Where things live: every path and environment setting Tokenizer Lab reads, resolved in one place.

Each function reads the environment *when called* (tests and the app may change it at run time):

=========================  ==========================================================  ==============================
variable                   meaning                                                     default
=========================  ==========================================================  ==============================
``TOKLAB_ASSETS``          the shared assets (tokenizers, FLORES-200, corpora)         ``../shared/assets`` beside the
                                                                                       repository
``TOKLAB_FLORES``          FLORES-200 / FLORES+ data (folder, ``.tar.gz``, parquet)    ``<assets>/flores200``, else a
                                                                                       downloaded copy in the cache
``TOKLAB_CACHE``           the on-disk cache (results, converted tokenizers)           ``~/.cache/tokenizer-lab``
``TOKLAB_CACHE_MAX_MB``    size cap of the disk cache (least recently used go first)   ``2048``
``TOKLAB_MODELS``          the small demo models (SmolLM2 GGUF, all-MiniLM-L6-v2)      ``~/.cache/tokenizer-lab/
                                                                                       models``
``TOKLAB_TOKENIZER_DIRS``  folders of tokenizer folders offered as examples            ``<assets>/tokenizers``
                           (``os.pathsep``-separated)
``TOKLAB_MAX_FILE_MB``     largest tokenizer/vocabulary/scores file read whole, however  ``200``
                           it arrives (upload, folder, path, zip member, hub)
``TOKLAB_MAX_UNZIPPED_MB`` largest total of the files a zipped tokenizer folder holds    ``400``
                           (actual bytes, counted while extracting)
``TOKLAB_MAX_TEXT_MB``     most text read from one text source (file, upload, zip,       ``256``
                           folder; decompressed bytes)
``TOKLAB_MAX_LINE_CHARS``  longest text unit: longer lines are read in pieces of this    ``1000000``
                           many characters (JSON lines longer than 16× this are refused)
``TOKLAB_PATHOLOGICAL_KB`` size of each input an edit's robustness report times       ``512``
``TOKLAB_DATA``             the workspaces (SQLite store and stored files)             ``$XDG_DATA_HOME/tokenizer-lab``
                                                                                       else ``~/.local/share/
                                                                                       tokenizer-lab``
``TOKLAB_WORKSPACE_MAX_MB`` most bytes one workspace holds (uploads, edits, results,    ``1024``
                           typed inputs)
``TOKLAB_WORKSPACE_MAX_ITEMS`` most library entries, results and shares in one         ``500``
                           workspace
``TOKLAB_WORKSPACE_IDLE_DAYS`` a workspace unused this long is removed (prune, and     ``90``
                           when its link is opened)
``TOKLAB_MEMORY_MB``       the app server's budget for loaded tokenizers (one LRU for     ``2048``
                           all sessions, keyed by content; estimated ≈ 20× a
                           tokenizer.json's bytes; the least recently used go first)
``TOKLAB_SERVER_PATHS``    ``1`` lets the browser name files and folders on the server   off
                           (load a folder, train on a folder, write an export folder)
``TOKLAB_SERVER_ROOTS``    the folders those paths must lie in (``os.pathsep``-          the user's home folder
                           separated; symlinks resolved, ``..`` refused)
=========================  ==========================================================  ==============================

Bundled data that ships with the repository (the embedded default tokenizer, the FLORES language table, the
Unicode tables) is under :data:`BUNDLED`.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from analysis.errors import DataError

#: The repository root (the folder holding `analysis/`).
ROOT = Path(__file__).resolve().parents[2]
#: Data committed with the repository.
BUNDLED = ROOT / "assets"


def _env_path(name: str) -> Path | None:
    v = os.environ.get(name, "").strip()
    return Path(v).expanduser() if v else None


def shared_assets() -> Path:
    """The shared assets folder: ``$TOKLAB_ASSETS``, else ``../shared/assets`` beside the repository.

    The folder may not exist (a fresh install without the shared data); callers check what they need.
    """
    return (_env_path("TOKLAB_ASSETS") or ROOT.parent / "shared" / "assets").resolve()


def cache_dir() -> Path:
    """Tokenizer Lab's on-disk cache (``$TOKLAB_CACHE``, else ``~/.cache/tokenizer-lab``), created on demand."""
    d = _env_path("TOKLAB_CACHE") or Path.home() / ".cache" / "tokenizer-lab"
    d.mkdir(parents=True, exist_ok=True)
    return d


def cache_max_bytes() -> int:
    """The disk cache's size cap in bytes (``$TOKLAB_CACHE_MAX_MB``, fractions allowed; default 2048 MB; a value
    that is not a positive number is ignored, as every size setting's)."""
    return _scaled(_env_number(("TOKLAB_CACHE_MAX_MB",), 2048), MB)


def models_dir() -> Path:
    """Where the small demo models are fetched (``$TOKLAB_MODELS``, else ``~/.cache/tokenizer-lab/models``)."""
    return _env_path("TOKLAB_MODELS") or Path.home() / ".cache" / "tokenizer-lab" / "models"


def flores_setting() -> Path | None:
    """The FLORES location the operator configured (``$TOKLAB_FLORES``), or None."""
    return _env_path("TOKLAB_FLORES")


def shared_flores() -> Path:
    """FLORES-200 inside the shared assets (may not exist)."""
    return shared_assets() / "flores200"


def shared_corpora() -> Path:
    """The shared text and code corpora (``<assets>/corpora``; may not exist)."""
    return shared_assets() / "corpora"


def code_corpus() -> Path:
    """The shared code corpus, files grouped by repository (``<assets>/corpora/code``; may not exist)."""
    return shared_corpora() / "code"


def data_dir() -> Path:
    """Where the workspaces live (``$TOKLAB_DATA``, else ``$XDG_DATA_HOME/tokenizer-lab``, else
    ``~/.local/share/tokenizer-lab``), created on demand."""
    xdg = _env_path("XDG_DATA_HOME")
    d = _env_path("TOKLAB_DATA") or (xdg or Path.home() / ".local" / "share") / "tokenizer-lab"
    d.mkdir(parents=True, exist_ok=True)
    return d


def tokenizer_dirs() -> list[Path]:
    """Existing folders whose sub-folders are example tokenizers (``$TOKLAB_TOKENIZER_DIRS``, else shared)."""
    env = os.environ.get("TOKLAB_TOKENIZER_DIRS", "")
    dirs = [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()] if env.strip() else []
    if not dirs:
        dirs = [shared_assets() / "tokenizers"]
    return [d for d in dirs if d.is_dir()]


# --------------------------------------------------------------------------------------------------
# Size caps (one per kind of input, however it arrives)
# --------------------------------------------------------------------------------------------------
#: One megabyte, the unit of the size settings.
MB = 1024 * 1024
#: A size setting above this is "no practical limit" (bytes or characters), not an overflow.
NO_LIMIT = 2**62


def _env_number(names: tuple[str, ...], default: float) -> float:
    """The first of `names` set to a finite positive number in the environment, else `default` (text, zero, a
    negative number, NaN or an infinity is ignored: every cap stays a number)."""
    for name in names:
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        try:
            v = float(raw)
        except ValueError:
            continue
        if math.isfinite(v) and v > 0:
            return v
    return default


def _scaled(value: float, unit: int = 1) -> int:
    """`value` × `unit` as a whole number from 1 to :data:`NO_LIMIT` (1e300 MB is no limit, not an OverflowError;
    a setting of a fraction of a byte is a cap of one, not of nothing)."""
    return max(1, int(min(value * unit, NO_LIMIT)))


def pathological_bytes() -> int:
    """Size of each pathological input whose encode time an edit's robustness report measures
    (``$TOKLAB_PATHOLOGICAL_KB``, default 512 KiB, at most 64 MiB): a hosted lab may lower it to spend less CPU on
    every edit; the test suite does, since it measures the same path on many edits."""
    return min(_scaled(_env_number(("TOKLAB_PATHOLOGICAL_KB",), 512), 1024), 64 * MB)


def max_file_bytes() -> int:
    """Largest single file read whole (tokenizer.json, .model, vocab/merges, scores, an upload): ``$TOKLAB_MAX_FILE_MB``.

    ``TOKLAB_MAX_UPLOAD_BYTES`` (bytes) is still read for older setups.
    """
    legacy = _env_number(("TOKLAB_MAX_UPLOAD_BYTES",), 0)
    if legacy:
        return _scaled(legacy)
    return _scaled(_env_number(("TOKLAB_MAX_FILE_MB",), 200), MB)


def upload_widget_mb() -> int:
    """The upload widgets' cap for files read whole (tokenizers, texts, a library or workspace zip), in whole MB:
    :func:`max_file_bytes`, rounded up. Model uploads have their own, larger one (:func:`model_upload_bytes`)."""
    return max(1, -(-max_file_bytes() // MB))


def max_unzipped_bytes() -> int:
    """Largest total of the files in a zipped tokenizer folder (``$TOKLAB_MAX_UNZIPPED_MB``, default 400 MB)."""
    legacy = _env_number(("TOKLAB_MAX_UNZIPPED_BYTES",), 0)
    if legacy:
        return _scaled(legacy)
    return _scaled(_env_number(("TOKLAB_MAX_UNZIPPED_MB",), 400), MB)


def max_text_bytes() -> int:
    """Most decompressed text read from one text source (``$TOKLAB_MAX_TEXT_MB``, default 256 MB)."""
    return _scaled(_env_number(("TOKLAB_MAX_TEXT_MB",), 256), MB)


def max_line_chars() -> int:
    """The longest text unit, in characters (``$TOKLAB_MAX_LINE_CHARS``, default 1,000,000): longer lines are
    read in pieces of this size, so one line never has to fit in memory whole."""
    return _scaled(_env_number(("TOKLAB_MAX_LINE_CHARS",), 1_000_000))


def model_upload_bytes() -> int:
    """Largest model a browser may upload, one file or all of them together (``$TOKLAB_MODEL_UPLOAD_MB``, default
    1024 MB); a zipped model folder may expand to twice that."""
    return _scaled(_env_number(("TOKLAB_MODEL_UPLOAD_MB",), 1024), MB)


def model_library_dir() -> Path | None:
    """The operator's model library (``$TOKLAB_MODEL_LIBRARY``): a folder whose sub-folders and ``.gguf`` /
    ``.safetensors`` files the model pickers offer by name, even with server paths off (None: not set)."""
    return _env_path("TOKLAB_MODEL_LIBRARY")


def workspace_max_bytes() -> int:
    """Most bytes one workspace may hold (``$TOKLAB_WORKSPACE_MAX_MB``, default 1024 MB)."""
    return _scaled(_env_number(("TOKLAB_WORKSPACE_MAX_MB",), 1024), MB)


def workspace_max_items() -> int:
    """Most library entries, results and shares one workspace may hold (``$TOKLAB_WORKSPACE_MAX_ITEMS``, 500)."""
    return _scaled(_env_number(("TOKLAB_WORKSPACE_MAX_ITEMS",), 500))


def workspace_idle_days() -> float:
    """Days a workspace may go unused before it is removed (``$TOKLAB_WORKSPACE_IDLE_DAYS``, default 90)."""
    return _env_number(("TOKLAB_WORKSPACE_IDLE_DAYS",), 90)


def memory_budget_bytes() -> int:
    """The app server's byte budget for loaded tokenizers, shared by all sessions (``$TOKLAB_MEMORY_MB``, default
    2048 MB: each tokenizer counts ≈ 20× its tokenizer.json, so about eleven of Llama-3.1's size (≈ 180 MB each)
    or five of Gemma's. A smaller budget than one page's tokenizers thrashes: a Playground of four examples and the
    default (≈ 630 MB) reloaded three tokenizers from disk on every rerun at the old 512 MB)."""
    return _scaled(_env_number(("TOKLAB_MEMORY_MB",), 2048), MB)


# --------------------------------------------------------------------------------------------------
# Server-side paths named by the browser (off by default)
# --------------------------------------------------------------------------------------------------
class ServerPathError(DataError):
    """A path typed in the browser that the server will not read or write."""


#: Longest path accepted from the browser (characters).
MAX_PATH_CHARS = 4096
#: Most entries of a folder checked for links leading outside the allowed roots.
MAX_FOLDER_ENTRIES = 20_000


def server_paths_enabled() -> bool:
    """Whether the browser may name files and folders on the server (``$TOKLAB_SERVER_PATHS``; off by default)."""
    return os.environ.get("TOKLAB_SERVER_PATHS", "").strip().lower() in ("1", "true", "yes", "on")


def server_roots() -> list[Path]:
    """The folders browser-named paths must lie in (``$TOKLAB_SERVER_ROOTS``, else the home folder), resolved."""
    env = os.environ.get("TOKLAB_SERVER_ROOTS", "")
    roots = [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    if not roots:
        roots = [Path.home()]
    return [r.resolve() for r in roots]


def _inside(p: Path, roots: list[Path]) -> bool:
    return any(p == r or p.is_relative_to(r) for r in roots)


def confine(raw: str | os.PathLike, *, write: bool = False) -> Path:
    """The resolved path a browser user typed, when the operator allows it; else ServerPathError.

    Refused: server paths switched off, an over-long path or one with a NUL byte, any `..` part, and a path
    that (symlinks resolved) lies outside :func:`server_roots`. For reading, the path must exist and a folder
    may not hold links leading outside the roots. For writing (`write=True`), the path must not exist yet (an
    export goes to a fresh folder, never into an existing one) and its parent must be an existing folder.
    """
    if not server_paths_enabled():
        raise ServerPathError(
            "server-side paths are switched off: upload the files instead (an operator can allow paths under "
            "chosen folders with TOKLAB_SERVER_PATHS=1 and TOKLAB_SERVER_ROOTS)"
        )
    text = os.fspath(raw).strip()
    if not text:
        raise ServerPathError("no path given")
    if len(text) > MAX_PATH_CHARS or "\x00" in text:
        raise ServerPathError(f"refused path: longer than {MAX_PATH_CHARS} characters or holding a NUL byte")
    p = Path(text).expanduser()
    if ".." in p.parts:
        raise ServerPathError(f"refused path {text!r}: '..' is not allowed")
    roots = server_roots()
    if not p.is_absolute():
        p = roots[0] / p
    try:
        resolved = p.resolve()
        exists = resolved.exists()
    except (OSError, RuntimeError) as e:
        raise ServerPathError(f"refused path {text!r}: {e}") from e
    allowed = ", ".join(str(r) for r in roots)
    if not _inside(resolved, roots):
        raise ServerPathError(f"refused path {text!r}: it lies outside the allowed folders ({allowed})")
    if write:
        if exists or p.is_symlink():
            raise ServerPathError(f"{text} already exists: exports go to a new folder, choose another name")
        if not resolved.parent.is_dir():
            raise ServerPathError(f"the folder {resolved.parent} does not exist")
        return resolved
    if not exists:
        raise ServerPathError(f"{text} does not exist")
    if resolved.is_dir():
        _check_links(resolved, roots, allowed)
    return resolved


def _check_links(folder: Path, roots: list[Path], allowed: str) -> None:
    """Refuse a folder holding a symlink that leads outside the roots (a planted link to another file)."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            seen += 1
            if seen > MAX_FOLDER_ENTRIES:
                raise ServerPathError(f"{folder} holds more than {MAX_FOLDER_ENTRIES:,} entries: refused")
            q = Path(dirpath) / name
            if q.is_symlink():
                try:
                    target = q.resolve()
                except (OSError, RuntimeError):
                    continue  # a dangling or looping link is never followed by the readers
                if not _inside(target, roots):
                    raise ServerPathError(
                        f"refused {folder}: {q.relative_to(folder)} links outside the allowed folders ({allowed})"
                    )


# --------------------------------------------------------------------------------------------------
# How a download or a page names a server file
# --------------------------------------------------------------------------------------------------
#: Tokenizer sources that name no server file (see `LoadedTokenizer.source`).
_NON_PATH_SOURCES = ("embedded", "hub:", "upload:", "edited:", "example:", "flores-train", "lines")


def public_name(path: str | os.PathLike) -> str:
    """How a download names a server file: relative to the shared assets' corpora, tokenizer folders or the
    assets themselves when it lies inside them (``text/et.txt``, ``gpt2``), else by its name alone — never by
    an absolute server path."""
    p = Path(path)
    if not p.is_absolute():
        return os.fspath(path)
    for base in (shared_corpora(), *tokenizer_dirs(), shared_assets()):
        try:
            return p.relative_to(base).as_posix() or p.name
        except ValueError:
            continue
    return p.name


def shown_path(path: str | os.PathLike) -> str:
    """A server path as a page shows it: whole when the operator allows server paths, else :func:`public_name`."""
    return os.fspath(path) if server_paths_enabled() else public_name(path)


def public_source(source: str) -> str:
    """A tokenizer's source label for a download: hub ids, uploads and edits as they are; a local path by
    :func:`public_name`."""
    s = source or ""
    if not s or s.startswith(_NON_PATH_SOURCES):
        return s
    return public_name(s.removeprefix("path:"))


#: An absolute server path (or a `~/…` one) of at least two parts, as messages quote it: not part of a URL
#: (`https://…`), a fraction or a word (`bytes/token`); it ends at a space, a quote or a bracket.
_PATH_IN_TEXT = re.compile(r"(?<![\w:/.~\-])~?(?:/[^\s'\"`()<>\[\]{},;|]+){2,}")


def public_text(text: str) -> str:
    """A message as a browser user may read it: every server path in it shortened to `…/` and its
    :func:`public_name` (`~/.cache/huggingface/hub` → `…/hub`), unless the operator allows server paths (pages then
    show whole paths, :func:`shown_path`). Error messages name files so that a command-line user can find them;
    the pages show them through here."""
    if server_paths_enabled():
        return text

    def short(m: re.Match) -> str:
        raw = m.group(0)
        tail = raw[len(raw.rstrip(".:")) :]  # a sentence's full stop or a colon after the path
        raw = raw[: len(raw) - len(tail)]
        return "…/" + public_name(os.path.expanduser(raw)) + tail

    return _PATH_IN_TEXT.sub(short, text)


#: Keys whose string values name server files in result documents (a model, corpus inputs, an output folder).
PATH_KEYS = frozenset(
    {"model", "corpus", "inputs", "source", "out", "path", "folder", "file", "files", "flores"}
)


def public_document(doc: Any) -> Any:
    """A copy of a result document as a download carries it: every string (or list of strings) under a
    :data:`PATH_KEYS` key names its file by :func:`public_source` (``gpt2``, ``text/et.txt``), never by the
    server's absolute path; everything else (a tokenizer's ``model`` object, token strings) is kept as it is.
    Downloads never carry the server's layout, also when the operator allows server paths (pages may then show
    whole paths, :func:`shown_path`)."""
    return _public_document(doc)


def _public_document(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _public_value(v) if k in PATH_KEYS else _public_document(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_public_document(v) for v in doc]
    return doc


def _public_value(v: Any) -> Any:
    if isinstance(v, str):
        return public_source(v)
    if isinstance(v, (list, tuple)):
        return [public_source(x) if isinstance(x, str) else _public_document(x) for x in v]
    return _public_document(v)
