"""The model check as a job (analysis.views.model_jobs): the edited model rebuilt in the worker from the recipe (the
two tokenizers and the report as workspace items) gives exactly the numbers of the page's thread version (its own
exporter closure), and the edited model's folder is kept as a zip artifact of the workspace."""

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
from analysis.jobs.queue import job_store_at, set_immediate
from analysis.methods.extension import ExtendResult, export_extension, plan
from analysis.texts.flores import split_lines
from analysis.tokenizer.export import folder_files, library_zip, write_files
from analysis.tokenizer.tokenizer import LoadedTokenizer
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


def test_job_and_thread_give_the_same_numbers(tmp_path: Path):
    gpt2 = load_shared("gpt2")
    train, held = split_lines("est_Latn")
    ext = plan(gpt2, "continued", train[:300], 40).apply(40)
    model = _tiny_model(gpt2, tmp_path / "model")
    res = ExtendResult(ext, 40, heldout={"est": held})
    options = {"langs": ["est_Latn"], "lines": 2, "inits": ["mean"], "steps": 0,
               "objective": OBJECTIVES[0]}  # fmt: skip

    def write(folder: Path, original: str) -> None:  # what the Extend page hands the thread version
        export_extension(res, folder, model=original, init="fvt")

    thread_doc = run_check(write, model, tmp_path / "thread" / "edited", "gpt2 +40", **options)

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
    assert _text(job_doc) == _text(thread_doc) and "bpb_edited" in _text(job_doc)
    assert job_doc["n_new_tokens"] == 40 and len(job_doc["languages"]) == 1
    with zipfile.ZipFile(io.BytesIO(store_at(data).read(ws, "artifact", name))) as z:
        names = z.namelist()
    assert any(n.endswith("/model.safetensors") for n in names) and any(
        n.endswith("/tokenizer.json") for n in names
    )


def _untimed(x: object) -> object:
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def _text(doc: dict) -> str:
    return json.dumps(_untimed(doc), sort_keys=True)
