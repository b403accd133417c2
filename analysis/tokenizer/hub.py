"""A tokenizer from the Hugging Face hub: only tokenizer files are fetched (:data:`HUB_TOKENIZER_PATTERNS`, never
weights), into the hub cache; offline mode and the cache folder are read at call time."""

from __future__ import annotations

import os
import re

from analysis.errors import TokenizerLoadError

from .folders import load_folder
from .tokenizer import LoadedTokenizer

#: The only files fetched from the hub: tokenizer files, never weights.
HUB_TOKENIZER_PATTERNS = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "*.tiktoken",
    "chat_template.jinja",
]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


def load_hub(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    name: str | None = None,
    cache_dir: str | None = None,
) -> LoadedTokenizer:
    """Download only the tokenizer files of a hub repo (or use the local HF cache offline) and load them."""
    repo_id = repo_id.strip()
    if not _HUB_ID.match(repo_id):
        raise TokenizerLoadError(f"{repo_id!r} is neither an existing path nor a valid hub id (owner/name)")
    try:
        from huggingface_hub import errors as hf_errors  # noqa: PLC0415 - heavy, loaded on use
        from huggingface_hub import snapshot_download  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover - huggingface_hub is a dependency of transformers
        raise TokenizerLoadError("huggingface_hub is not installed") from e
    label = f"{repo_id}@{revision}" if revision else repo_id
    # huggingface_hub reads HF_HUB_OFFLINE / HF_HUB_CACHE once, at import: read them at call time instead
    offline = hub_offline()
    cache_dir = str(cache_dir) if cache_dir else hub_cache_dir()
    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            token=token or None,
            cache_dir=cache_dir,
            allow_patterns=HUB_TOKENIZER_PATTERNS,
            local_files_only=offline,
        )
    except hf_errors.GatedRepoError as e:
        if token:
            raise TokenizerLoadError(
                f"{label} is gated and this access token has no access: accept its license on the hub"
            ) from e
        raise TokenizerLoadError(
            f"{label} is gated: accept its license on the hub and give an access token"
        ) from e
    except hf_errors.RevisionNotFoundError as e:
        raise TokenizerLoadError(f"{label}: revision {revision!r} does not exist") from e
    except hf_errors.RepositoryNotFoundError as e:
        raise TokenizerLoadError(
            f"{label}: no such repository on the hub (or it is private: give an access token)"
        ) from e
    except hf_errors.LocalEntryNotFoundError as e:
        if offline:
            raise TokenizerLoadError(
                f"{label}: not in the local Hugging Face cache ({cache_dir}) and offline mode is on "
                "(HF_HUB_OFFLINE=1); load a local folder or upload the files instead"
            ) from e
        raise TokenizerLoadError(
            f"{label}: not in the local Hugging Face cache and the hub cannot be reached "
            "(offline or no network); load a local folder or upload the files instead"
        ) from e
    except hf_errors.HfHubHTTPError as e:
        raise TokenizerLoadError(f"{label}: the hub answered with an error: {e}") from e
    except (OSError, ValueError) as e:
        raise TokenizerLoadError(f"{label}: could not download ({e.__class__.__name__}: {e})") from e
    tok = load_folder(folder, name=name or label)
    return tok.with_source(source=f"hub:{label}")


def _env_flag(name: str) -> bool | None:
    v = os.environ.get(name)
    if v is None:
        return None
    return v.strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_offline() -> bool:
    """Whether hub access is switched off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, read now)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        flag = _env_flag(var)
        if flag:
            return True
    if _env_flag("HF_HUB_OFFLINE") is False:
        return False
    try:
        from huggingface_hub import constants  # noqa: PLC0415 - heavy, loaded on use
    except ImportError:  # pragma: no cover
        return False
    return bool(constants.HF_HUB_OFFLINE)


def hub_cache_dir() -> str:
    """The Hugging Face hub cache folder (HF_HUB_CACHE, else HF_HOME/hub, else the library default), read now."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    from huggingface_hub import constants  # noqa: PLC0415 - heavy, loaded on use

    return constants.HF_HUB_CACHE
