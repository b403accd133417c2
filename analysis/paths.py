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
=========================  ==========================================================  ==============================

Bundled data that ships with the repository (the embedded default tokenizer, the FLORES language table, the
Unicode tables) is under :data:`BUNDLED`.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The repository root (the folder holding `analysis/`).
ROOT = Path(__file__).resolve().parents[1]
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
    """The disk cache's size cap in bytes (``$TOKLAB_CACHE_MAX_MB``, default 2048 MB; at least 1 MB)."""
    raw = os.environ.get("TOKLAB_CACHE_MAX_MB", "").strip()
    try:
        mb = float(raw) if raw else 2048.0
    except ValueError:
        mb = 2048.0
    return max(1, int(mb * 1024 * 1024))


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


def tokenizer_dirs() -> list[Path]:
    """Existing folders whose sub-folders are example tokenizers (``$TOKLAB_TOKENIZER_DIRS``, else shared)."""
    env = os.environ.get("TOKLAB_TOKENIZER_DIRS", "")
    dirs = [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()] if env.strip() else []
    if not dirs:
        dirs = [shared_assets() / "tokenizers"]
    return [d for d in dirs if d.is_dir()]
