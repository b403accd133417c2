"""The model follows an extension: the export folder holds the extended tokenizer and, given the base model, the
model with its input embeddings and LM head grown to the new vocabulary.

Every old id keeps its row (an extension only appends ids), so on text made only of unchanged tokens the
model computes exactly what the original did; the rows of the new ids are initialised by
:func:`analysis.adapt.embeddings.remap_embeddings`: FVT (the mean of the rows of the token's pieces under the
original tokenizer; Gee et al. 2022, as Purason et al. 2025, App. E), the mean of all rows, or samples of a
multivariate normal with the mean and covariance of the rows (Kim 2025). Tied weights stay tied; the config's
``vocab_size`` and special-token ids follow. The model loads through :func:`analysis.model.models.load_causal_lm`
(safetensors, GGUF de-quantized, PyTorch files only with ``weights_only=True``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analysis.adapt.embeddings import INITS, load_model, remap_embeddings, save_model
from analysis.core.outputs import atomic_folder
from analysis.errors import DataError
from analysis.tokenizer.export import folder_files, write_files
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .report import ExtendResult

REPORT_NAME = "extension_report.json"


def export_extension(
    result: ExtendResult,
    out_dir: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    init: str = "fvt",
    seed: int = 0,
    replace: bool = False,
) -> list[str]:
    """Write the extended tokenizer folder (with ``extension_report.json``) to `out_dir`, and with `model` (the
    base tokenizer's model) the model whose embeddings and LM head cover the new ids.

    Atomic (:func:`analysis.core.outputs.atomic_folder`): the folder appears complete or not at all; a non-empty
    `out_dir` is refused unless `replace`. Sets ``result.model`` and ``result.out``; returns the relative paths
    written. DataError when the model has fewer embedding rows than the base tokenizer has ids.
    """
    if init not in INITS:
        raise DataError(f"unknown embedding init {init!r}; choose one of {', '.join(INITS)}")
    ext = result.extension
    new = ext.tokenizer
    with atomic_folder(out_dir, replace=replace) as tmp:
        if model:
            result.model = grow_model(ext.base, new, tmp, model, init=init, seed=seed)
        result.out = str(Path(out_dir).resolve())
        files = folder_files(new, result.to_json(), base_config=new.config, report_name=REPORT_NAME)
        write_files(tmp, files)
        written = sorted(f.relative_to(tmp).as_posix() for f in tmp.rglob("*") if f.is_file())
    return written


def grow_model(
    base: LoadedTokenizer,
    new: LoadedTokenizer,
    out_dir: str | os.PathLike,
    model: str | os.PathLike,
    *,
    init: str = "fvt",
    seed: int = 0,
) -> dict[str, Any]:
    """Write `model` (the model of `base`) into the existing folder `out_dir` with its input embeddings and LM head
    grown to the ids of `new` (an extension of `base`: every old id keeps its row), the new rows initialised by
    `init`; returns what the report's ``model`` field holds. The model side of :func:`export_extension`, which a
    job (:mod:`analysis.views.model_jobs`) calls with the two tokenizers read back from its workspace."""
    if init not in INITS:
        raise DataError(f"unknown embedding init {init!r}; choose one of {', '.join(INITS)}")
    m = load_model(model)
    old_rows = int(m.get_input_embeddings().weight.shape[0])
    identity = {i: i for i in base.id_to_token}
    rep = remap_embeddings(m, base, new, identity, init=init, seed=seed)
    info = {k: v for k, v in rep.to_json().items() if k != "pieces_sample"}
    info.update(
        source=str(model),
        old_rows=old_rows,
        vocab_size=int(m.config.vocab_size),
        tokens=new.vocab_size,
        pieces_sample={str(k): v for k, v in list(rep.pieces.items())[:50]},
    )
    save_model(m, out_dir)
    return info
