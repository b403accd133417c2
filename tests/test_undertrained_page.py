"""AppTest for the Under-trained tokens page on a small synthetic checkpoint (fast): the view shows the
verification run that just finished, and verification skips the reference tokens unless asked to include them.

The checkpoint is a byte-level BPE trained on FLORES lines plus random embedding rows; the reference tokens
(reserved special tokens, bytes that never occur in UTF-8) get tiny rows, so the reserved ones sort first among
the candidates — as in real models. The language model itself is replaced by a fake verifier (the real one runs in the slow tests and in the
browser test on SmolLM2), so this test is about what the page shows, not about the verdicts.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from safetensors.numpy import save_file
from streamlit.testing.v1 import AppTest
from support import ROOT, flores_lines
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from analysis import undertrained as ut
from analysis.tokenizer import BYTE_TO_CHAR
from analysis.undertrained import INVALID_UTF8_BYTES, Verification

RESERVED = [f"<|reserved_special_token_{k}|>" for k in range(8)]


@pytest.fixture(scope="module")
def synthetic_model(tmp_path_factory):
    """A folder with tokenizer.json, config.json and model.safetensors (untied input embeddings and LM head)."""
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(
        vocab_size=700,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", *RESERVED],
        show_progress=False,
    )
    tk.train_from_iterator(flores_lines("eng_Latn", 400), trainer=tr)
    v = tk.get_vocab_size()
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((v, 16)).astype(np.float32)
    head = rng.standard_normal((v, 16)).astype(np.float32)
    # the reference tokens (reserved specials, bytes that never occur in UTF-8) were never trained: tiny rows
    never = [tk.token_to_id(t) for t in RESERVED] + [
        tk.token_to_id(BYTE_TO_CHAR[b]) for b in INVALID_UTF8_BYTES
    ]
    for i in never:
        emb[i] = 0.01 * rng.standard_normal(16)
        head[i] = 0.01 * rng.standard_normal(16)
    folder = tmp_path_factory.mktemp("synthetic") / "model"
    folder.mkdir()
    tk.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "tie_word_embeddings": False, "vocab_size": v})
    )
    save_file({"model.embed_tokens.weight": emb, "lm_head.weight": head}, str(folder / "model.safetensors"))
    return folder


def _fake_verifier(calls: list[list[int]]):
    """Stands in for `verify_result`: marks the ids the real one would verify as strongly verified."""

    def verify(result, model, tok, k, *, include_references=False, progress=None, **kw):
        todo = result.verification_queue(k, include_references=include_references)
        calls.append(todo)
        for n, i in enumerate(todo, 1):
            result.verifications[i] = Verification(i, 1e-4, "strong_verified", [])
            if progress:
                progress(n, len(todo), "candidates verified")
        return [result.verifications[i] for i in todo]

    return verify


def _page(monkeypatch, tmp_path, folder) -> tuple[AppTest, list[list[int]]]:
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")  # a trusted local user names the model folder
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(folder.parent))
    calls: list[list[int]] = []
    monkeypatch.setattr(ut, "verify_result", _fake_verifier(calls))
    monkeypatch.setattr(ut, "load_lm", lambda *a, **k: (object(), "cpu"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/undertrained.py").run()
    at.selectbox(key="ut-model-kind").select("Folder or file path on the server").run()
    at.text_input(key="ut-model-path").input(str(folder)).run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at, calls


def _array(v) -> np.ndarray:
    """A plotly figure array: a list, or Plotly's typed-array form {"dtype", "bdata"} (base64)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
    return np.asarray(v, dtype=float)


def _verification_points(at: AppTest) -> list[float]:
    """The finite y values (max probabilities) of the verification scatter."""
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if "Verification" in json.dumps(spec.get("layout", {}).get("title", "")):
            ys = np.concatenate([_array(t.get("y", [])) for t in spec["data"]])
            return [float(y) for y in ys if np.isfinite(y)]
    raise AssertionError("no verification chart")


def test_verification_shows_the_run_that_just_finished(synthetic_model, monkeypatch, tmp_path):
    """Right after "Verify", the caption, the chart and the token-health table show this run's verdicts."""
    at, calls = _page(monkeypatch, tmp_path, synthetic_model)
    at.number_input(key="ut-k").set_value(3).run()
    at.button(key="ut-verify").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert len(calls) == 1 and len(calls[0]) == 3
    assert any("3 verified so far; 3 with max probability < 0.01" in c.value for c in at.caption), [
        c.value for c in at.caption
    ]
    assert len(_verification_points(at)) == 3  # every verified candidate is a point, in the same run
    health = next(
        d.value for d in at.dataframe if {"verdict", "max_prob", "candidate"} <= set(d.value.columns)
    )
    assert (health["verdict"] == "strong_verified").sum() == 3


def test_verification_skips_reference_tokens_by_default(synthetic_model, monkeypatch, tmp_path):
    at, calls = _page(monkeypatch, tmp_path, synthetic_model)
    refs = {int(i) for i in at.dataframe[0].value["id"]}  # "Reference tokens used"
    assert len(refs) >= 10
    at.number_input(key="ut-k").set_value(4).run()
    at.button(key="ut-verify").click().run()
    assert calls[-1] and not set(calls[-1]) & refs
    at.checkbox(key="ut-include-refs").check().run()
    at.button(key="ut-verify").click().run()
    assert set(calls[-1]) <= refs  # the references come first among the candidates (lowest indicator)


def test_verification_queue_skips_references(synthetic_model):
    """The engine's order: candidates by indicator, references left out unless included, done ones skipped."""
    res = ut.analyze(str(synthetic_model))
    refs = set(res.references.ids)
    assert res.candidates[: len(refs)] and set(res.candidates[:3]) <= refs
    queue = res.verification_queue(5)
    assert len(queue) == 5 and not set(queue) & refs
    assert queue == [i for i in res.candidates if i not in refs][:5]
    assert res.verification_queue(3, include_references=True) == res.candidates[:3]
    res.verifications[queue[0]] = Verification(queue[0], 0.5, "weak_rejected", [])
    assert res.verification_queue(5) == queue[1:]
