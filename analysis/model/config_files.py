"""The JSON files beside a saved Hugging Face checkpoint (`config.json`, `generation_config.json`, …): read them
leniently, write them atomically, and write them in the forms every loader accepts.

The accepted forms are what :mod:`analysis.evaluate.preflight`'s ``special_ids`` and ``legacy_fields`` checks ask
for; :func:`write_accepted_forms` writes them right after `save_pretrained` (:mod:`analysis.adapt.embeddings`).
"""

from __future__ import annotations

from pathlib import Path

from analysis.core.inputs import parse_json, read_file
from analysis.core.outputs import atomic_write_text, strict_json
from analysis.errors import DataError


def read_json_file(path: Path) -> dict | None:
    """The JSON object in `path`; None when the file is absent, unreadable, not JSON or not an object (read
    bounded: :func:`analysis.core.inputs.read_file`; the export check's ``json_files`` reports the unreadable)."""
    if not path.is_file():
        return None
    try:
        doc = parse_json(read_file(path), path.name)
    except DataError:
        return None
    return doc if isinstance(doc, dict) else None


def write_json_file(path: Path, doc: dict) -> None:
    """Write `doc` to `path` as strict JSON, atomically."""
    atomic_write_text(path, strict_json(doc) + "\n")


def normalise_generation_config(folder: Path) -> None:
    """Write generation_config.json's eos_token_id as the list of terminators (the fixed form of special_ids)."""
    gpath = folder / "generation_config.json"
    gen = read_json_file(gpath)
    if (
        gen is not None
        and isinstance(gen.get("eos_token_id"), int)
        and not isinstance(gen["eos_token_id"], bool)
    ):
        gen["eos_token_id"] = [gen["eos_token_id"]]
        write_json_file(gpath, gen)


def write_accepted_forms(folder: Path) -> None:
    """After `save_pretrained`: generation_config.json's eos as a list, config.json's `torch_dtype` beside `dtype`
    (the fixed forms of ``special_ids`` and ``legacy_fields``)."""
    normalise_generation_config(folder)
    cpath = folder / "config.json"
    cfg = read_json_file(cpath)
    if cfg is not None and "dtype" in cfg and "torch_dtype" not in cfg:
        cfg["torch_dtype"] = cfg["dtype"]
        write_json_file(cpath, cfg)
