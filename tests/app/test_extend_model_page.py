"""AppTest: the Extend page exports the model with the extended tokenizer (SmolLM2 GGUF, FVT rows) into a new
server folder, and the written model loads with one embedding row per token (its Model check section is tested in
test_model_check_section.py)."""

from __future__ import annotations

import pytest
import torch
import transformers
from streamlit.testing.v1 import AppTest
from support import ROOT, SMOLLM, load_shared, need_smollm

from analysis.adapt.fvt import fvt_pieces
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
    assert any("Wrote" in s.value for s in at.success), [s.value for s in at.success]
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
    # the Model check section (this session's own export, a background job): tests/app/test_model_check_section.py
