"""A tokenizer on this machine: a folder (`tokenizer.json` first, then a SentencePiece model, tiktoken or slow
files, converted by :mod:`.converters`) or one `tokenizer.json`, with the folder's `tokenizer_config.json` (and
`chat_template.jinja`); every file read under the one size cap."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analysis.core.inputs import parse_json, read_file
from analysis.errors import AnalysisError, TokenizerLoadError

from .converters import (
    gpt2_files_to_document,
    sentencepiece_to_document,
    tiktoken_to_document,
    wordpiece_vocab_to_document,
)
from .tokenizer import LoadedTokenizer


def load_folder(folder: str | os.PathLike, *, name: str | None = None) -> LoadedTokenizer:
    """Load a tokenizer folder: tokenizer.json first, then a SentencePiece model, tiktoken or slow files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TokenizerLoadError(f"not a folder: {folder}")
    name = name or folder.name
    config = _config_of(folder)
    if (folder / "tokenizer.json").is_file():
        return load_tokenizer_json(folder / "tokenizer.json", name=name, config=config, source=str(folder))
    for sp in ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model"):
        if (folder / sp).is_file():
            doc = sentencepiece_to_document(read_tokenizer_file(folder / sp))
            return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    tik = sorted(q for q in folder.glob("*.tiktoken") if q.is_file())
    if tik:
        doc = tiktoken_to_document(read_tokenizer_file(tik[0]))
        return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        doc = gpt2_files_to_document(
            read_tokenizer_file(folder / "vocab.json"), read_tokenizer_file(folder / "merges.txt")
        )
        return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    if (folder / "vocab.txt").is_file():
        lower = bool(config.get("do_lower_case", True))
        doc = wordpiece_vocab_to_document(read_tokenizer_file(folder / "vocab.txt"), lowercase=lower)
        return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    raise TokenizerLoadError(
        f"{folder} holds no tokenizer files (looked for tokenizer.json, tokenizer.model, *.tiktoken, "
        "vocab.json + merges.txt, vocab.txt)"
    )


def load_tokenizer_json(
    path: str | os.PathLike, *, name: str | None = None, config: dict | None = None, source: str = ""
) -> LoadedTokenizer:
    """Load one tokenizer.json file."""
    path = Path(path)
    text = read_tokenizer_file(path)
    if config is None:
        config = _config_of(path.parent)
    return LoadedTokenizer.from_json_text(
        text, name=name or path.parent.name or path.stem, source=source or str(path), config=config
    )


def read_tokenizer_file(path: Path) -> bytes:
    """A tokenizer file's bytes under the one size cap (TokenizerLoadError when unreadable or too large)."""
    return read_file(path, TokenizerLoadError)


def _read_json_if(path: Path) -> dict[str, Any]:
    """An optional JSON side file (tokenizer_config.json): {} when missing or corrupt; too large is an error."""
    if not path.is_file():
        return {}
    data = read_tokenizer_file(path)
    try:
        doc = parse_json(data, path.name, TokenizerLoadError)
    except AnalysisError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _config_of(folder: Path) -> dict[str, Any]:
    """tokenizer_config.json of a folder, with the template of `chat_template.jinja` as `chat_template` when the
    config has none (newer repositories keep the chat template in that file)."""
    config = _read_json_if(folder / "tokenizer_config.json")
    jinja = folder / "chat_template.jinja"
    if not config.get("chat_template") and jinja.is_file():
        config["chat_template"] = read_tokenizer_file(jinja).decode("utf-8", errors="replace")
    return config
