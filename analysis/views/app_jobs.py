"""The app's heavy work besides the model-side edits, as job kinds run by a worker (:mod:`analysis.jobs.queue`):

* ``gallery`` (:func:`gallery_job`): the example gallery's build (:func:`analysis.views.gallery.build_gallery`),
  submitted once per server at the background priority, so it yields to users' jobs;
* ``compression`` (:func:`compression_job`): the Compression page's table
  (:func:`analysis.measure.grid.compression_table`) beyond :data:`COMPRESSION_JOB_CELLS` tokenizer × language cells;
* ``verify-undertrained`` (:func:`verify_undertrained_job`): the Under-trained tokens page's verification prompts
  (:func:`analysis.methods.undertrained.verify_result`) on the page's indicators (:func:`analysis.methods.undertrained.analyze`).

Tokenizers travel as a library zip stored in the job's workspace (``params["tokenizers"]``, an artifact's name), so
the worker measures the same tokenizer (the same content hash) as the page would; every other input is plain JSON.
"""

from __future__ import annotations

import math
from typing import Any

from analysis.core.outputs import json_ready
from analysis.errors import DataError
from analysis.measure import grid
from analysis.methods import undertrained as ut
from analysis.model.source import resolve_model, tokenizer_for_model
from analysis.texts import flores as fl
from analysis.tokenizer.sources import load_library_zip
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.views import gallery

#: Up to this many tokenizer × language cells the Compression page computes in its own run (a few seconds at
#: most); beyond, it submits a ``compression`` job.
COMPRESSION_JOB_CELLS = 16


def job_tokenizers(params: dict[str, Any], ctx: Any) -> dict[str, LoadedTokenizer]:
    """name → tokenizer of the library zip that ``params["tokenizers"]`` names in the job's workspace."""
    data = ctx.file_path("artifact", str(params["tokenizers"])).read_bytes()
    return dict(load_library_zip(data))


# ---------------------------------------------------------------------------------------------- the gallery
def gallery_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``gallery``: compute and store the gallery's missing entries (one stage per entry); which entries
    it computed and which are still missing (a folder or model that does not load)."""
    g = gallery.read_gallery()
    if g.data_key is None:
        raise DataError("FLORES-200 was not found (set TOKLAB_FLORES or TOKLAB_ASSETS): the gallery needs it")
    total = max(1, len(g.missing) + len(g.models_missing))
    computed: list[str] = []
    ctx.progress(0.0, f"{total} entries to compute")

    def before(name: str) -> None:
        ctx.progress(len(computed) / total, f"computing {name}")

    def after(entry: Any) -> None:
        computed.append(getattr(entry, "name", None) or entry.key)
        ctx.log(f"stored {computed[-1]}")

    built = gallery.build_gallery(on_entry=after, before_entry=before)
    return {"computed": computed, "missing": built.missing + built.models_missing}


# ---------------------------------------------------------------------------------------------- compression
def compression_params(
    tokenizers: str, names: list[str], flores: str, split: str, langs: list[str], power: float, reference: str
) -> dict[str, Any]:
    """The ``compression`` job's params (plain JSON): what :func:`compression_job` measures."""
    return {"tokenizers": tokenizers, "names": list(names), "flores": flores, "split": split,
            "langs": list(langs), "power": float(power), "reference": reference}  # fmt: skip


def compression_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``compression``: :func:`analysis.measure.grid.compression_table` of the params' tokenizers on their
    FLORES languages (progress per cell); ``{"rows": [...]}``, the rows the page computes in its own run."""
    toks = job_tokenizers(params, ctx)
    names = [str(n) for n in params["names"]]
    missing = [n for n in names if n not in toks]
    if missing:
        raise DataError(f"the job's tokenizers lack {', '.join(missing)}")
    ctx.progress(0.0, "reading FLORES")
    data = fl.open_flores(params.get("flores") or None, split=str(params["split"]))
    ctx.progress(0.0, "measuring every tokenizer × language")
    rows = grid.compression_table([toks[n] for n in names], data, list(params["langs"]),
                                  power=float(params["power"]), reference=str(params["reference"]), names=names,
                                  progress=ctx.engine_progress)  # fmt: skip
    return {"rows": json_ready(rows)}


# ---------------------------------------------------------------------------------------------- under-trained
def verify_undertrained_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``verify-undertrained``: the page's indicators (:func:`analysis.methods.undertrained.analyze`, the
    same options), then the verification prompts of the first ``k`` candidates
    (:func:`analysis.methods.undertrained.verify_result`); the verifications, placement and timings."""
    model = str(params["model"])
    ctx.progress(0.0, "reading the tokenizer")
    if params.get("tokenizers"):
        tok = next(iter(job_tokenizers(params, ctx).values()))
    else:
        tok = tokenizer_for_model(resolve_model(model))
    ctx.progress(0.0, "computing the indicators")
    refs = [int(i) for i in params.get("refs", [])]
    res = ut.analyze(model, tok, reference_ids=refs or None, remove_pc1=bool(params.get("pc1")),
                     percentile=float(params["pct"]), device=str(params.get("ind_device", "cpu")))  # fmt: skip
    dev = str(params.get("device", "auto"))
    ctx.progress(0.0, "verifying the candidates")
    ut.verify_result(res, model, tok, int(params["k"]), batch_size=int(params.get("batch_size", 8)),
                     include_references=bool(params.get("include_references")),
                     device=None if dev == "auto" else dev, device_map="auto" if params.get("spread") else None,
                     max_memory=ut.parse_max_memory(str(params.get("max_memory", ""))),
                     progress=ctx.engine_progress, should_stop=ctx.should_stop)  # fmt: skip
    return json_ready({"verifications": [v.as_dict() for v in res.verifications.values()],
                       "placement": res.placement, "timings": res.timings})  # fmt: skip


def verifications_from_job(doc: dict[str, Any]) -> dict[int, ut.Verification]:
    """id → verification of a ``verify-undertrained`` job's result, as the worker made it (a probability written
    as null is NaN)."""

    def prob(x: Any) -> float:
        return math.nan if x is None else float(x)

    out: dict[int, ut.Verification] = {}
    for v in doc.get("verifications", []):
        prompts = [ut.PromptResult(str(p["test_name"]), bool(p["encodeable"]), str(p["output"]), prob(p["max_prob"]))
                   for p in v.get("prompts", [])]  # fmt: skip
        out[int(v["id"])] = ut.Verification(int(v["id"]), prob(v["max_prob"]), str(v["verdict"]), prompts)
    return out
