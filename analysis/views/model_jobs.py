"""The model-side jobs of the edit pages, run by a worker (:mod:`analysis.jobs.queue`): the model check of an edit
and the export of the edited model into the workspace, both rebuilding the edited model from a *recipe* (closures
cannot travel to another process).

:func:`run_check` is the check itself, given a function that writes the edited model (the CLI's and the tests'
direct way); :func:`model_check_job` is the job kind ``model-check``: it reads the recipe's tokenizers from the job's workspace,
writes the edited model with the same engine function the page's export uses (:data:`EDITS`, by ``op``), runs
:func:`run_check` and stores the edited model's folder as a zip artifact of the workspace (a zip that cannot be
stored — the workspace's quota, a full disk — leaves the check's document, with ``model_artifact_error``).
:func:`model_export_job` is the job kind ``model-export``: the same recipe (with ``name`` and ``gguf``), the
edited model's folder kept as ``<name>.zip`` and, with ``gguf``, ``<name>.gguf``.

Recipe (the job's params, plain JSON)::

    {"op": "extend" | "prune" | "transplant",
     "tokenizers": "<artifact: library zip with the entries 'edited' and (extend, prune) 'base'>",
     "names": {"base": "<library name>", "edited": "<library name>"},
     "report": "<artifact: the edit's report JSON, or absent>", "model": "<model source>", "init": "fvt", "k": 8,
     "label": "...", "langs": [...], "lines": 20, "inits": [...], "steps": 0, "objective": "...",
     "keep_model": true}
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis.adapt.embeddings import remap_model
from analysis.adapt.transplant import DEFAULT_K, read_for_model_check, transplant
from analysis.adapt.warmup import WarmupConfig, warm_up
from analysis.core import paths
from analysis.core.outputs import atomic_folder, atomic_write_text, json_document, json_ready, strict_json
from analysis.core.progress import scaled
from analysis.errors import AnalysisError, DataError
from analysis.evaluate.model_check import EditedReader, heldout_texts, load_pair, model_check, training_texts
from analysis.methods.extension import grow_model
from analysis.methods.extension.model import REPORT_NAME
from analysis.methods.pruning.report import REPORT_NAME as PRUNE_REPORT
from analysis.methods.reuse.model import export_model as export_reused
from analysis.methods.reuse.model import read_for_model_check as read_reused
from analysis.methods.reuse.reuse import MAPPING_FILE, ReuseTokenizer
from analysis.methods.undertrained import indicators_for
from analysis.model.gguf_model import export_gguf
from analysis.tokenizer.export import folder_files, write_files, zip_folder
from analysis.tokenizer.sources import load_library_zip, safe_extract_zip
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: What :func:`run_check` is given: writes the edit with the model `original` into the empty folder given.
Exporter = Callable[[Path, str], Any]


def run_check(
    export: Exporter,
    original: str,
    folder: Path,
    label: str,
    *,
    langs: list[str],
    lines: int,
    inits: list[str],
    steps: int,
    objective: str,
    reader: EditedReader | None = None,
    progress: Callable[[float, float | None, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Write the edit with `original` into `folder` (`export`), load both models, measure, warm up; the JSON
    document (no server path in it: the edited model is named by `label`). `reader` reads an edit that is not one
    tokenizer (R-BPE)."""
    report = progress or (lambda *_: None)
    report(0.0, 1.0, "writing the edited model")
    export(folder, original)
    report(0.05, 1.0, "loading both models")
    first, second = load_pair(original, folder, reader=reader, progress=scaled(progress, 0.05, 0.1))
    texts = heldout_texts(langs, lines)
    res = model_check(first, second, texts, inits=inits, progress=scaled(progress, 0.1, 0.5 if steps else 1.0),
                      should_stop=should_stop)  # fmt: skip
    res.indicators = indicators_for(folder, second.tok, [u.id for u in res.new_tokens])
    if steps and res.complete:
        cfg = WarmupConfig(steps=steps, objective=objective, tokens_per_step=256)
        wu = warm_up(first, second, training_texts(langs[:1]), texts, cfg, progress=scaled(progress, 0.5, 1.0),
                     should_stop=should_stop)  # fmt: skip
        res.warmup = wu.to_json()
    doc = paths.public_document(res.to_json())
    doc["original"] = paths.public_source(doc["original"])
    doc["edited"] = label
    return doc


# ---------------------------------------------------------------------------------------------- recipes
def write_extended(
    tokenizers: dict[str, LoadedTokenizer],
    report: dict[str, Any] | None,
    folder: Path,
    model: str,
    params: dict,
) -> None:
    """The Extend page's export (:func:`analysis.methods.extension.export_extension`) from a recipe: the model
    grown to the edited tokenizer's ids, then the tokenizer folder with the report."""
    base, new = tokenizers["base"], tokenizers["edited"]
    folder.mkdir(parents=True, exist_ok=True)
    info = grow_model(base, new, folder, model, init=str(params.get("init", "fvt")))
    doc = dict(report or {})
    doc["model"] = info
    write_files(folder, folder_files(new, doc, base_config=new.config, report_name=REPORT_NAME))


def write_pruned_model(
    tokenizers: dict[str, LoadedTokenizer],
    report: dict[str, Any] | None,
    folder: Path,
    model: str,
    params: dict,
) -> None:
    """The Prune page's export (:func:`analysis.methods.pruning.report.write_pruned`) from a recipe: the pruned
    tokenizer's folder with its report, the model's rows remapped by the report's id map, the report with the
    model's description."""
    if not report or "id_map" not in report:
        raise DataError("the pruning job needs the pruning report (its id map)")
    base, new = tokenizers["base"], tokenizers["edited"]
    id_map = {int(k): int(v) for k, v in report["id_map"].items()}
    folder.mkdir(parents=True, exist_ok=True)
    write_files(folder, folder_files(new, report, base_config=new.config, report_name=PRUNE_REPORT))
    remap = remap_model(model, base, new, id_map, folder, init=str(params.get("init", "fvt")))
    doc = {**report, "model": {k: v for k, v in remap.to_json().items() if k != "pieces_sample"}}
    write_files(folder, {PRUNE_REPORT: strict_json(json_ready(doc)).encode("utf-8")})


def write_transplant(
    tokenizers: dict[str, LoadedTokenizer],
    report: dict[str, Any] | None,
    folder: Path,
    model: str,
    params: dict,
) -> dict[str, Any]:
    """The Transplant page's transplant (:func:`analysis.adapt.transplant.transplant`) from a recipe: the model with
    the recipe's tokenizer (``edited``), rows by ``init`` (OMP with ``k`` atoms); the transplant's report (no server
    path in it), which the job's document carries as ``edit_report``."""
    res = transplant(model, tokenizers["edited"], folder, init=str(params.get("init", "omp")),
                     k=int(params.get("k", DEFAULT_K)))  # fmt: skip
    doc = paths.public_document(res.to_json())
    doc["model"] = paths.public_source(doc["model"])
    doc.pop("out", None)
    return doc


def write_reused(
    tokenizers: dict[str, LoadedTokenizer],
    report: dict[str, Any] | None,
    folder: Path,
    model: str,
    params: dict,
) -> dict[str, Any]:
    """The Token reuse page's model export (:func:`analysis.methods.reuse.model.export_model`) from a recipe: the
    R-BPE tokenizer (the folder :func:`recipe_edit` extracted from the recipe's ``rbpe`` zip) with the model's
    reused rows re-initialised by FVT; the model's report (no server path)."""
    rt = ReuseTokenizer.load(Path(params["rbpe_folder"]))
    done = export_reused(rt, model, folder)
    done.pop("out", None)
    done["source"] = paths.public_source(str(done.get("source", model)))
    return done


#: op → how the edited model is written from the recipe's tokenizers, its report, the model and the params (an
#: edit's own report, when it has one, is returned and kept in the document as ``edit_report``).
EDITS: dict[str, Callable[[dict[str, LoadedTokenizer], dict[str, Any] | None, Path, str, dict], Any]] = {
    "extend": write_extended,
    "prune": write_pruned_model,
    "transplant": write_transplant,
    "reuse": write_reused,
}
#: op → how the check reads an edited folder that is not one tokenizer over the original's ids.
READERS: dict[str, EditedReader] = {"transplant": read_for_model_check, "reuse": read_reused}


def recipe_tokenizers(data: bytes) -> dict[str, LoadedTokenizer]:
    """The recipe's tokenizers (a library zip with the entry ``edited`` and, for an edit of a tokenizer, ``base``)."""
    found = dict(load_library_zip(data))
    if "edited" not in found:
        raise DataError("the job's tokenizers are incomplete (a library zip with 'edited' is needed)")
    return found


def recipe_edit(
    params: dict[str, Any], ctx: Any, tmp: Path
) -> tuple[str, dict[str, LoadedTokenizer], dict[str, Any] | None, dict[str, Any]]:
    """The recipe's edit (``op``), its tokenizers (by their library names), its report and the params the edit's
    writer takes, read from the job's workspace (an R-BPE zip, ``rbpe``, is extracted under `tmp`); DataError for an
    unknown edit or missing inputs."""
    op = str(params.get("op"))
    if op not in EDITS:
        raise DataError(f"unknown edit {op!r}; one of {', '.join(EDITS)}")
    if op == "reuse":  # R-BPE is no single tokenizer: its folder (old and new tokenizer, the mapping) travels
        if not params.get("rbpe"):
            raise DataError("the job's R-BPE tokenizer is missing (a zip named 'rbpe')")
        safe_extract_zip(ctx.file_path("artifact", str(params["rbpe"])).read_bytes(), tmp / "rbpe-in")
        found = sorted(p.parent for p in (tmp / "rbpe-in").rglob(MAPPING_FILE))
        if not found:
            raise DataError(f"the job's R-BPE zip holds no {MAPPING_FILE}")
        return op, {}, None, {**params, "rbpe_folder": str(found[0])}
    toks = recipe_tokenizers(ctx.file_path("artifact", str(params["tokenizers"])).read_bytes())
    names = params.get("names") or {}  # the library's names (a transplant's report names its tokenizer)
    toks = {k: t.with_source(name=str(names[k])) if names.get(k) else t for k, t in toks.items()}
    if op != "transplant" and "base" not in toks:
        raise DataError("the job's tokenizers are incomplete (this edit needs 'base')")
    report = None
    if params.get("report"):
        report = json.loads(ctx.file_path("artifact", str(params["report"])).read_text(encoding="utf-8"))
    return op, toks, report, params


#: What storing a file in the workspace may raise (its quota, a full disk) that leaves a check's document intact.
STORE_ERRORS = (AnalysisError, OSError)


def model_check_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``model-check``: rebuild the edited model from the recipe, check it (:func:`run_check`) and keep
    the edited model's folder as a zip artifact (``keep_model``); the model check's document. When the zip cannot
    be stored (quota, disk full) the document stays, with ``model_artifact_error`` saying why."""
    model, label = str(params["model"]), str(params.get("label", "edited"))
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="toklab-model-job-") as tmp:
        op, toks, report, args = recipe_edit(params, ctx, Path(tmp))

        def export(folder: Path, original: str) -> None:
            made = EDITS[op](toks, report, folder, original, args)
            if isinstance(made, dict):
                extra["edit_report"] = made

        folder = Path(tmp) / "out" / folder_name(label)
        folder.parent.mkdir()
        doc = run_check(export, model, folder, label, langs=list(params["langs"]), lines=int(params["lines"]),
                        inits=list(params.get("inits", [])), steps=int(params.get("steps", 0)),
                        objective=str(params.get("objective", "")), reader=READERS.get(op),
                        progress=ctx.engine_progress, should_stop=ctx.should_stop)  # fmt: skip
        doc.update(extra)
        if params.get("keep_model"):
            ctx.progress(None, "storing the edited model (zip)")
            name = str(params.get("model_name") or f"{label} model.zip")
            try:
                public_reports(folder)
                archive = Path(tmp) / "model.zip"
                zip_folder(folder, archive)
                ctx.put_file("artifact", name, {"job": "model-check", "what": "edited model (Hugging Face folder)"},
                             archive)  # fmt: skip
                doc["model_artifact"] = name
            except STORE_ERRORS as e:
                doc["model_artifact_error"] = paths.public_text(f"the edited model was not kept: {e}")
                ctx.log(doc["model_artifact_error"])
    return doc


def public_reports(folder: Path) -> None:
    """Rewrite the edit's reports in a model folder a browser will download (``*_report.json``: the transplant's,
    the extension's, the pruning's) with every file named as downloads name files, never by the server's layout
    (:func:`analysis.core.paths.public_document`)."""
    for rep in folder.glob("*_report.json"):
        atomic_write_text(rep, json_document(paths.public_document(json.loads(rep.read_text("utf-8")))))


def model_export_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``model-export``: write the recipe's edited model (the page's export) and keep its Hugging Face
    folder as the workspace artifact ``<name>.zip`` and, with ``gguf``, its ``<name>.gguf`` (f32, as the CLI's
    ``--gguf``); ``{"artifacts": [[name, what], ...], "op": ...}``."""
    model, name = str(params["model"]), folder_name(str(params.get("name") or "edited-model"))
    if params.get("out"):
        return _model_export_to_folder(params, ctx, model, name)
    kept: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="toklab-model-export-") as tmp:
        op, toks, report, args = _export_recipe(params, ctx, Path(tmp))
        meta = {"job": "model-export", "op": op}
        folder = Path(tmp) / name
        ctx.progress(0.0, "writing the edited model")
        EDITS[op](toks, report, folder, model, args)
        public_reports(folder)
        ctx.progress(0.5, "storing the model (zip)")
        archive = Path(tmp) / "model.zip"
        zip_folder(folder, archive)
        ctx.put_file(
            "artifact", f"{name}.zip", {**meta, "what": "edited model (Hugging Face folder)"}, archive
        )
        kept.append([f"{name}.zip", "Download the model (Hugging Face folder, zip)"])
        if params.get("gguf"):
            ctx.progress(0.6, "writing the .gguf")
            export_gguf(folder, toks["edited"], model_source=model, base=toks.get("base"), name=name)
            ctx.progress(0.9, "storing the .gguf")
            ctx.put_file("artifact", f"{name}.gguf", {**meta, "what": "GGUF"}, folder / f"{name}.gguf")
            kept.append([f"{name}.gguf", "Download the .gguf"])
    ctx.progress(1.0, "done")
    return {"op": op, "name": name, "artifacts": kept}


def _export_recipe(
    params: dict[str, Any], ctx: Any, tmp: Path
) -> tuple[str, dict[str, LoadedTokenizer], dict[str, Any] | None, dict[str, Any]]:
    """:func:`recipe_edit` for a model export, refused before the model is written when a ``.gguf`` is asked of an
    edit whose tokenizer is not one vocabulary (R-BPE)."""
    op, toks, report, args = recipe_edit(params, ctx, tmp)
    if params.get("gguf") and "edited" not in toks:
        raise DataError(f"a .gguf of the {op} edit is not offered (its tokenizer is not one vocabulary)")
    return op, toks, report, args


def _model_export_to_folder(params: dict[str, Any], ctx: Any, model: str, name: str) -> dict[str, Any]:
    """:func:`model_export_job` into a new folder on the server (``params["out"]``: only where the operator allows
    server paths; confined to the allowed roots again here, in the worker): built in a temporary sibling and moved
    into place whole (:func:`analysis.core.outputs.atomic_folder`); its files are listed, nothing is stored."""
    out = paths.confine(str(params["out"]), write=True)
    with tempfile.TemporaryDirectory(prefix="toklab-model-export-") as tmp:
        op, toks, report, args = _export_recipe(params, ctx, Path(tmp))
        ctx.progress(0.0, "writing the edited model")
        with atomic_folder(out) as folder:
            made = EDITS[op](toks, report, folder, model, args)
            if params.get("gguf"):
                ctx.progress(0.6, "writing the .gguf")
                export_gguf(folder, toks["edited"], model_source=model, base=toks.get("base"), name=name)
    ctx.progress(1.0, "done")
    files = sorted(p.name for p in out.iterdir())
    return {"op": op, "name": name, "folder": str(out), "files": files, "artifacts": [],
            **({"edit_report": made} if isinstance(made, dict) else {})}  # fmt: skip


def folder_name(label: str) -> str:
    """A folder name for a zip's top level made from a label."""
    keep = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label).strip("._")
    return keep[:80] or "edited-model"
