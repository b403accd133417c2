"""AppTest: the Extend page exports the model with the extended tokenizer (SmolLM2 GGUF, FVT rows) into a new
server folder (a job of the workers, as every model write), and into the workspace as downloads (the same folder as a zip, and a .gguf); the written model loads
with one embedding row per token (its Model check section is tested in
test_model_check_section.py)."""

from __future__ import annotations

import zipfile

import pytest
import torch
import transformers
from streamlit.testing.v1 import AppTest
from support import ROOT, SMOLLM, load_shared, need_smollm, run_page_job

from analysis.adapt.fvt import fvt_pieces
from analysis.core.workspace import default_store
from analysis.model.models import load_causal_lm
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer
from ui.loaders import fetched_models

N = 60


@need_smollm
@pytest.mark.slow
def test_extend_page_exports_the_grown_model(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(tmp_path))
    smol = load_shared("smollm2-135m-instruct")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {DEFAULT_NAME: default_tokenizer(), "smollm2": smol}
    at.run()
    at.switch_page("pages/extend.py").run()
    at.selectbox(key="ext-tok").set_value("smollm2").run()
    at.multiselect(key="ext-corpora").set_value([]).run()  # FLORES training lines only
    at.multiselect(key="ext-others").set_value([]).run()
    at.multiselect(key="ext-methods").set_value(["continued"]).run()
    at.number_input(key="ext-nmax").set_value(N).run()
    at.button(key="ext-train").click().run()
    at.slider(key="ext-n").set_value(N).run()
    at.button(key="ext-build").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    label = next(k for k, v in fetched_models().items() if str(v).endswith(".gguf"))
    at.selectbox(key="ext-model-kind").set_value(label).run()
    at.selectbox(key="ext-init").set_value("fvt").run()
    out = tmp_path / "smol-extended"
    at.text_input(key="ext-model-out").set_value(str(out)).run()
    at.button(key="ext-model-build").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    assert not out.exists()  # a job of the workers writes it (here, this process as a worker would)
    job = run_page_job(at, "ext-model")
    assert job.state == "done", job.error
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    assert any("Wrote" in s.value for s in at.success), [s.value for s in at.success]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]  # built aside, moved into place
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out))
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    rows = model.get_input_embeddings().weight
    added = len(tok) - smol.vocab_size
    assert 0 < added <= N and rows.shape[0] >= len(tok) and model.config.vocab_size == rows.shape[0]
    # old rows unchanged; each new row is the mean of its pieces' rows in the original model (FVT)
    original = load_causal_lm(SMOLLM).model.get_input_embeddings().weight.float()
    new = rows.detach().float()
    assert torch.equal(new[: smol.vocab_size], original[: smol.vocab_size])
    token = tok.convert_ids_to_tokens(len(tok) - 1)
    pieces = fvt_pieces(smol, token)
    assert len(pieces) >= 2
    torch.testing.assert_close(new[len(tok) - 1], original[pieces].mean(0), rtol=1e-3, atol=1e-4)
    # the same export into the workspace, as a server with paths off offers it: the folder as a zip, and a .gguf
    at.text_input(key="ext-model-out").set_value("")  # the written folder exists now: the field would say so
    at.checkbox(key="ext-model-gguf").check().run()
    at.button(key="ext-model-ws-build").click().run()
    job = run_page_job(at, "ext-model-ws")  # a worker's work, here in this process
    assert job.state == "done", job.error
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    labels = [e.proto.label for e in at.get("link_button")]
    assert any(x.startswith("Download the model (Hugging Face folder, zip) · ") for x in labels), labels
    assert any(x.startswith("Download the .gguf · ") for x in labels), labels
    ws = at.query_params["ws"][0] if isinstance(at.query_params["ws"], list) else at.query_params["ws"]
    kept = {
        i.name: default_store().file_path(ws, "artifact", i.name)
        for i in default_store().items(ws, "artifact")
        if not i.name.startswith("job-inputs/")  # the job's inputs (the edit's tokenizers and report)
    }
    [zipped] = [n for n in kept if n.endswith(".zip")]
    with zipfile.ZipFile(kept[zipped]) as zf:
        members = {m.split("/", 1)[1] for m in zf.namelist()}
        report = zf.read(next(m for m in zf.namelist() if m.endswith("extension_report.json"))).decode()
    assert members == {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert str(SMOLLM.parent) not in report and "/tmp" not in report  # no server layout in a download
    [gguf] = [n for n in kept if n.endswith(".gguf")]
    assert kept[gguf].read_bytes()[:4] == b"GGUF"
    # the Model check section (this session's own export, a background job): tests/app/test_model_check_section.py
