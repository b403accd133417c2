"""AppTest for the Under-trained tokens page on a small synthetic checkpoint (fast): the view shows the
verification run that just finished, and verification skips the reference tokens unless asked to include them;
the big-model options (where the indicators run, verification placement with accelerate's device map and memory
caps) and the page's JSON report, which is the CLI's document.

The checkpoint is a byte-level BPE trained on FLORES lines plus random embedding rows; the reference tokens
(reserved special tokens, bytes that never occur in UTF-8) get tiny rows, so the reserved ones sort first among
the candidates — as in real models. The language model itself is replaced by a fake verifier (the real one runs in the slow tests, on the
tiny Llama and on SmolLM2: test_undertrained_models_page.py), so this test is about what the page shows, not about the verdicts.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest
from app_support import verification_points
from download_support import record_downloads, without
from safetensors.numpy import save_file
from streamlit.testing.v1 import AppTest
from support import ROOT, flores_lines
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from analysis.cli import main
from analysis.core import paths
from analysis.core.paths import public_document
from analysis.core.workspace import default_store
from analysis.errors import DataError
from analysis.jobs.queue import default_jobs, set_immediate
from analysis.methods import undertrained as ut
from analysis.methods.undertrained import INVALID_UTF8_BYTES, Verification
from analysis.tokenizer.alphabets import BYTE_TO_CHAR

RESERVED = [f"<|reserved_special_token_{k}|>" for k in range(8)]


def _bpe() -> Tokenizer:
    """A 700-token byte-level BPE trained on English FLORES lines, with reserved special tokens."""
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
    return tk


@pytest.fixture(scope="module")
def synthetic_model(tmp_path_factory):
    """A folder with tokenizer.json, config.json and model.safetensors (untied input embeddings and LM head)."""
    tk = _bpe()
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


@pytest.fixture(autouse=True)
def _jobs_at_once():
    """ "Verify" submits a job: here it runs at once, in this process (huey's immediate mode)."""
    set_immediate(paths.data_dir())
    yield
    set_immediate(paths.data_dir(), False)


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
    monkeypatch.setattr(ut, "place_lm", lambda *a, **k: ut.PlacedLM(object(), "cpu", {"device": "cpu"}))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/undertrained.py").run()
    at.selectbox(key="ut-model-kind").select("Folder or file path on the server").run()
    at.text_input(key="ut-model-path").input(str(folder)).run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at, calls


def _job_id(ws: str) -> str:
    """The id of the page's verification job, as the workspace keeps it."""
    return default_store().inputs(ws)["job:ut-verify"]


@pytest.mark.slow
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
    assert len(verification_points(at)) == 3  # every verified candidate is a point, in the same run
    health = next(
        d.value for d in at.dataframe if {"verdict", "max_prob", "candidate"} <= set(d.value.columns)
    )
    assert (health["verdict"] == "strong_verified").sum() == 3
    # it ran as a job of the workspace; a reload (a new session, same workspace) shows it again without a new run
    ws = at.session_state["toklab-ws"]
    job = default_jobs().get(ws, _job_id(ws))
    assert job.kind == "verify-undertrained" and job.state == "done" and len(job.result["verifications"]) == 3
    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    again.session_state["toklab-ws"] = ws
    again.run()
    again.switch_page("pages/undertrained.py").run()
    again.selectbox(key="ut-model-kind").select("Folder or file path on the server").run()
    again.text_input(key="ut-model-path").input(str(synthetic_model)).run()
    again.button(key="ut-run").click().run()  # the same indicators: the page finds the job's verifications
    assert not again.exception, [e.message for e in again.exception]
    assert len(calls) == 1 and len(verification_points(again)) == 3


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


# ------------------------------------------------------------------------------- devices, placement, the report
def _open(monkeypatch, tmp_path, folder, downloads: bool = False) -> tuple[AppTest, dict[str, bytes]]:
    """The page with `folder` chosen as the model (nothing computed yet)."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(folder.parent))
    got = record_downloads(monkeypatch) if downloads else {}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/undertrained.py").run()
    at.selectbox(key="ut-model-kind").select("Folder or file path on the server").run()
    at.text_input(key="ut-model-path").input(str(folder)).run()
    return at, got


def _cli_json(*args: str) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["undertrained", *args, "--json"]) == 0
    return json.loads(buf.getvalue())


@pytest.mark.slow
@pytest.mark.skipif(ut.cuda_available(), reason="this machine has CUDA")
def test_cuda_asked_for_on_a_machine_without_it(synthetic_model, monkeypatch, tmp_path):
    """Without CUDA, choosing it says so and disables the run, instead of failing; cpu and auto still work."""
    at, _ = _open(monkeypatch, tmp_path, synthetic_model)
    at.selectbox(key="ut-ind-dev").select("cuda").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("CUDA is not available on this machine" in w.value for w in at.warning)
    assert at.button(key="ut-run").disabled
    at.selectbox(key="ut-ind-dev").select("auto").run()
    assert not at.button(key="ut-run").disabled
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "Indicators computed on cpu" in " ".join(c.value for c in at.caption)  # auto: no CUDA → the CPU
    at.selectbox(key="ut-dev").select("cuda").run()
    assert any("verification can run on the CPU only" in w.value for w in at.warning)
    assert at.button(key="ut-verify").disabled and not at.exception
    at.selectbox(key="ut-dev").select("cpu").run()
    at.text_input(key="ut-maxmem").input("0=20").run()  # not DEVICE=SIZE with a unit
    assert any("max memory entry" in e.value for e in at.error) and at.button(key="ut-verify").disabled
    at.text_input(key="ut-maxmem").input("cpu=1GiB").run()
    assert not at.error and not at.button(key="ut-verify").disabled
    # the engine refuses the same requests with a DataError (the CLI prints it and exits 2)
    with pytest.raises(DataError, match="CUDA is not available"):
        ut.analyze(str(synthetic_model), device="cuda")
    with pytest.raises(DataError, match="CUDA is not available"):
        ut.place_lm(str(synthetic_model), device="cuda")
    with pytest.raises(DataError, match="max memory names GPU 0"):
        ut.place_lm(str(synthetic_model), device="cpu", max_memory={0: "1GiB"})


def test_page_report_is_the_cli_json(synthetic_model, monkeypatch, tmp_path):
    """ "Download the report (JSON)" offers the document `undertrained --json` prints for the same model and
    options (timings aside)."""
    at, got = _open(monkeypatch, tmp_path, synthetic_model, downloads=True)
    at.number_input(key="ut-pct").set_value(3.0).run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    page = json.loads(got["ut-dl-report"])
    cli = _cli_json("--model", str(synthetic_model), "--percentile", "3")
    assert page["percentile"] == 3.0 and page["n_candidates"] == len(page["candidates"]) > 10
    assert without(page, {"timings_s"}) == without(public_document(cli), {"timings_s"})  # files by name
    assert set(page["timings_s"]) == set(cli["timings_s"]) == {"tokenizer", "read_weights", "round_trip",
                                                                 "indicators"}  # fmt: skip


@pytest.fixture(scope="module")
def random_llama(tmp_path_factory):
    """A real (untrained, randomly initialised) 2-layer untied Llama with the BPE above: enough for verification
    to run its prompts through a network and for accelerate to split it between CPU memory and disk."""
    import torch  # noqa: PLC0415 - heavy, only for this fixture
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    tk = _bpe()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tk.get_vocab_size(), hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                      tie_word_embeddings=False, bos_token_id=None, eos_token_id=0, pad_token_id=0)  # fmt: skip
    folder = tmp_path_factory.mktemp("random-llama") / "model"
    LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    tk.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.slow
def test_verification_placement_shown_and_report_is_the_cli_json(random_llama, monkeypatch, tmp_path):
    """Verification with a CPU memory cap: accelerate spreads the model over CPU memory and disk, the page shows
    where it went and the cost per candidate, and its JSON report equals the CLI's for the same options."""
    at, got = _open(monkeypatch, tmp_path, random_llama, downloads=True)
    at.button(key="ut-run").click().run()
    at.number_input(key="ut-k").set_value(4).run()
    at.selectbox(key="ut-dev").select("cpu").run()
    at.text_input(key="ut-maxmem").input("cpu=300KiB").run()  # the embeddings and a layer fit, the rest: disk
    at.button(key="ut-verify").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert (
        metrics["Verified on"] == "cpu" and "disk" in metrics["Device map"] and "cpu" in metrics["Device map"]
    )
    assert metrics["Per candidate"].endswith(" ms")
    assert any("4 verified so far" in c.value for c in at.caption)
    page = json.loads(got["ut-dl-report"])
    assert page["verified"] == 4 and page["placement"]["device_map"] == "auto"
    assert (
        page["placement"]["max_memory"] == {"cpu": "300KiB"} and page["timings_s"]["verify_per_candidate"] > 0
    )
    cli = _cli_json(
        "--model", str(random_llama), "--verify", "4", "--device", "cpu", "--max-memory", "cpu=300KiB"
    )
    assert without(page, {"timings_s"}) == without(public_document(cli), {"timings_s"})  # files by name
