"""The export check for any export this app writes (the CLI's `export-check` and the pages' "Export check"
section call this one function): a method whose export is more than one tokenizer.json brings its own view
(R-BPE: :func:`analysis.methods.reuse.export_check.reuse_codec`); everything else is checked as a Hugging Face
folder or a GGUF file (:func:`analysis.evaluate.export_check.check_export`). In the app it runs as the job kind
``export-check`` (:func:`export_check_job`) of a worker, never in the page."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from tempfile import TemporaryDirectory
from typing import Any

from analysis.core.progress import Progress
from analysis.errors import DataError
from analysis.evaluate.export_check import ExportCheckReport, check_export
from analysis.methods.reuse.export_check import reuse_codec
from analysis.model.upload import unpack_model
from analysis.tokenizer.sources import load_library_zip
from analysis.tokenizer.tokenizer import LoadedTokenizer


def run_export_check(
    path: str | os.PathLike,
    *,
    base: LoadedTokenizer | None = None,
    original_model: str | os.PathLike | None = None,
    langs: Sequence[str] | None = None,
    max_lines: int | None = None,
    parity: bool = True,
    fix: bool = False,
    probe_model: bool = True,
    progress: Progress | None = None,
) -> ExportCheckReport:
    """Check an export folder or GGUF file (see :func:`analysis.evaluate.export_check.check_export`); an R-BPE
    folder is read through its method's view, its original tokenizer the default `base`."""
    codec = reuse_codec(path) if os.path.isdir(path) else None
    return check_export(
        path,
        base=base,
        original_model=original_model,
        langs=langs,
        max_lines=max_lines,
        parity=parity,
        fix=fix,
        codec=codec,
        probe_model=probe_model,
        progress=progress,
    )


#: Largest export zip the job unpacks (the zips the pages build are tokenizer folders, a few MB).
MAX_UNPACKED = 512 * 1024 * 1024


def unpack_export_zip(data: bytes, into: Path) -> Path:
    """Unpack an export zip (a page's own download) into `into`; the folder holding its files. DataError for a
    zip over :data:`MAX_UNPACKED` (checked before anything is written) or with an unsafe member name."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise DataError(f"the export is not a zip file ({e})") from None
    with zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if sum(i.file_size for i in infos) > MAX_UNPACKED:
            raise DataError("the export is too large to check here; use `python -m analysis export-check`")
        for i in infos:
            rel = PurePosixPath(i.filename)
            if rel.is_absolute() or ".." in rel.parts:
                raise DataError(f"unsafe name in the export zip: {i.filename!r}")
        for i in infos:
            target = into.joinpath(*PurePosixPath(i.filename).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(i))
    parts = [PurePosixPath(i.filename).parts for i in infos]
    tops = {p[0] for p in parts}
    return into / tops.pop() if len(tops) == 1 and all(len(p) > 1 for p in parts) else into


def export_check_params(
    what: dict[str, str], base: str | None, langs: Sequence[str], max_lines: int, parity: bool
) -> dict[str, Any]:
    """The ``export-check`` job's params: `what` is one of ``{"zip": artifact}`` (a page's export, stored as a job
    input), ``{"file": artifact}`` (a workspace file: a model export, an uploaded model) or ``{"server": path}``
    (a path the operator's roots allow); `base` the library zip (a job input) holding the original tokenizer."""
    return {**what, "base": base, "langs": list(langs), "max_lines": int(max_lines), "parity": bool(parity)}


def export_check_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``export-check``: :func:`run_export_check` on the export `params` names (see
    :func:`export_check_params`); the report's JSON document, a workspace file named by its workspace name."""
    base = None
    if params.get("base"):
        base = next(iter(load_library_zip(ctx.file_path("artifact", str(params["base"])).read_bytes())))[1]
    with TemporaryDirectory(prefix="toklab-check-") as tmp:
        if params.get("file"):
            blob = ctx.file_path("artifact", str(params["file"]))
            path: Path = unpack_model(blob, str(params["file"]), digest=blob.name)
        elif params.get("server"):
            path = Path(str(params["server"]))
        else:
            ctx.progress(0.0, "unpacking the export")
            path = unpack_export_zip(ctx.file_path("artifact", str(params["zip"])).read_bytes(), Path(tmp))
        rep = run_export_check(path, base=base, langs=list(params["langs"]), max_lines=int(params["max_lines"]),
                               parity=bool(params["parity"]), probe_model=True, progress=ctx.engine_progress)  # fmt: skip
        doc = rep.to_json()
    if params.get("file"):  # named as the workspace names it, never by the server's layout
        doc["path"] = str(params["file"])
        if doc.get("parity") and doc["parity"].get("gguf"):
            doc["parity"]["gguf"] = Path(doc["parity"]["gguf"]).name
    return doc
