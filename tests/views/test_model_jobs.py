"""The model check as a job (analysis.views.model_jobs): the edited model rebuilt in the worker from the recipe (the
two tokenizers and the report as workspace items) gives exactly the numbers of the check run directly on the edit
(`run_check` with an exporter closure, as the CLI writes the edit), and the edited model's folder is kept as a zip artifact of the workspace (a full workspace
keeps the document and says why the zip is missing); the model export job keeps the zip and the .gguf."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
import torch
import transformers
from support import load_shared

from analysis.adapt.warmup import OBJECTIVES
from analysis.core.workspace import store_at
from analysis.errors import DataError
from analysis.jobs.queue import job_store_at, set_immediate
from analysis.methods.extension import ExtendResult, export_extension, plan
from analysis.texts.flores import split_lines
from analysis.tokenizer.export import folder_files, library_zip, write_files
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.views import model_jobs
from analysis.views.model_jobs import run_check

pytestmark = pytest.mark.slow


def _tiny_model(tok: LoadedTokenizer, folder: Path) -> str:
    """A one-layer Llama with `tok`'s vocabulary, saved with the tokenizer's files."""
    vocab_size = tok.vocab_size
    cfg = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                                   tie_word_embeddings=True, bos_token_id=50256, eos_token_id=50256)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).eval().save_pretrained(str(folder), safe_serialization=True)
    write_files(folder, folder_files(tok, None))
    return str(folder)


def test_job_and_direct_check_give_the_same_numbers(tmp_path: Path, monkeypatch):
    gpt2 = load_shared("gpt2")
    train, held = split_lines("est_Latn")
    ext = plan(gpt2, "continued", train[:300], 40).apply(40)
    model = _tiny_model(gpt2, tmp_path / "model")
    res = ExtendResult(ext, 40, heldout={"est": held})
    options = {"langs": ["est_Latn"], "lines": 2, "inits": ["mean"], "steps": 0,
               "objective": OBJECTIVES[0]}  # fmt: skip

    def write(folder: Path, original: str) -> None:  # the edit written directly, as the CLI does
        export_extension(res, folder, model=original, init="fvt")

    direct_doc = run_check(write, model, tmp_path / "direct" / "edited", "gpt2 +40", **options)

    data = str((tmp_path / "data").resolve())
    ws = store_at(data).create()
    store_at(data).put(
        ws, "artifact", "job-inputs/t.zip", {}, library_zip({"base": gpt2, "edited": ext.tokenizer})
    )
    store_at(data).put(ws, "artifact", "job-inputs/r.json", {}, json.dumps(res.to_json()).encode())
    params = {"op": "extend", "tokenizers": "job-inputs/t.zip", "report": "job-inputs/r.json", "model": model,
              "init": "fvt", "label": "gpt2 +40", "keep_model": True, **options}  # fmt: skip
    set_immediate(data)
    try:
        job = job_store_at(data).submit(ws, "model-check", params)
    finally:
        set_immediate(data, False)
    assert job.state == "done", job.error
    job_doc = dict(job.result)
    name = job_doc.pop("model_artifact")
    # the same document, number for number (the JSON text of both), but for how long each took
    assert _text(job_doc) == _text(direct_doc) and "bpb_edited" in _text(job_doc)
    assert job_doc["n_new_tokens"] == 40 and len(job_doc["languages"]) == 1
    with zipfile.ZipFile(io.BytesIO(store_at(data).read(ws, "artifact", name))) as z:
        names = z.namelist()
        report_text = z.read(next(n for n in names if n.endswith("/extension_report.json"))).decode()
    assert any(n.endswith("/model.safetensors") for n in names) and any(
        n.endswith("/tokenizer.json") for n in names
    )
    # the kept model's report names the model as a download does, not by its server path (the transplant's did)
    assert str(tmp_path) not in report_text, [ln for ln in report_text.splitlines() if str(tmp_path) in ln]

    # the workspace is full when the zip is stored: the check's document stays, with why the zip was not kept (the
    # check itself stubbed: it only writes the edited model, as run_check does first)
    def quick_check(export, original, folder, label, **_):  # noqa: ANN001, ANN003, ANN202
        export(folder, original)
        return dict(job_doc)

    monkeypatch.setattr(model_jobs, "run_check", quick_check)
    monkeypatch.setenv("TOKLAB_WORKSPACE_MAX_MB", str(1000 / 2**20))
    set_immediate(data)
    try:
        full = job_store_at(data).submit(ws, "model-check", {**params, "model_name": "again.zip"})
    finally:
        set_immediate(data, False)
    assert full.state == "done", full.error
    assert "model_artifact" not in full.result and "workspace is full" in full.result["model_artifact_error"]
    assert {k: v for k, v in full.result.items() if k != "model_artifact_error"} == job_doc
    assert store_at(data).get(ws, "artifact", "again.zip") is None


def test_model_export_job_keeps_the_zip_and_the_gguf(tmp_path: Path):
    """Job kind ``model-export`` (the Extend and Prune pages' "Export the model into this workspace"): the edited
    model's folder as ``<name>.zip`` and its ``<name>.gguf``, as workspace artifacts; no server path in the report."""
    gpt2 = load_shared("gpt2")
    train, held = split_lines("est_Latn")
    ext = plan(gpt2, "continued", train[:300], 20).apply(20)
    model = _tiny_model(gpt2, tmp_path / "model")
    data = str((tmp_path / "data").resolve())
    ws = store_at(data).create()
    store_at(data).put(ws, "artifact", "t.zip", {}, library_zip({"base": gpt2, "edited": ext.tokenizer}))
    report = ExtendResult(ext, 20, heldout={"est": held}).to_json()
    store_at(data).put(ws, "artifact", "r.json", {}, json.dumps(report).encode())
    params = {"op": "extend", "tokenizers": "t.zip", "report": "r.json", "model": model, "init": "fvt",
              "name": "gpt2-20", "gguf": True}  # fmt: skip
    set_immediate(data)
    try:
        job = job_store_at(data).submit(ws, "model-export", params)
    finally:
        set_immediate(data, False)
    assert job.state == "done", job.error
    names = [a for a, _ in job.result["artifacts"]]
    assert names == ["gpt2-20.zip", "gpt2-20.gguf"]
    with zipfile.ZipFile(io.BytesIO(store_at(data).read(ws, "artifact", "gpt2-20.zip"))) as z:
        members = {n.split("/", 1)[1] for n in z.namelist()}
        text = z.read(next(n for n in z.namelist() if n.endswith("extension_report.json"))).decode()
    assert {"model.safetensors", "config.json", "tokenizer.json", "extension_report.json"} <= members
    assert str(tmp_path) not in text and "toklab-model-export" not in text
    assert store_at(data).read(ws, "artifact", "gpt2-20.gguf")[:4] == b"GGUF"


def _untimed(x: object) -> object:
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def _text(doc: dict) -> str:
    return json.dumps(_untimed(doc), sort_keys=True)


def test_a_gguf_of_an_edit_without_one_vocabulary_is_refused_before_the_model_is_written(monkeypatch):
    """R-BPE routes text between two tokenizers: a model export asking it for a ``.gguf`` is refused with a clear
    error before any model is read or written (the same check for both exports, into the workspace or a folder)."""
    monkeypatch.setattr(model_jobs, "recipe_edit", lambda params, ctx, tmp: ("reuse", {}, None, {}))
    with pytest.raises(DataError, match="a .gguf of the reuse edit is not offered"):
        model_jobs.model_export_job({"model": "m", "gguf": True}, object())
    with pytest.raises(DataError, match="a .gguf of the reuse edit is not offered"):
        model_jobs._export_recipe({"gguf": True}, object(), Path("."))
    assert model_jobs._export_recipe({"gguf": False}, object(), Path("."))[0] == "reuse"
