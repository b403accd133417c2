"""scripts/start.sh's first start: requirements.txt in the foreground, llama.cpp (requirements-llama.txt, built from
source) in the background while the app serves, and a stamp only for a complete install (scripts/venv.sh). The
scripts run against a fake environment whose `pip` succeeds or fails on demand: nothing is installed or built."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT

from analysis.errors import ModelLoadError
from analysis.model import llamacpp

FAKE_PIP = """#!/usr/bin/env bash
echo "fake pip $*"
while [ -n "${FAKE_PIP_HOLD:-}" ] && [ ! -e "$FAKE_PIP_HOLD" ]; do sleep 0.05; done  # until the test lets it end
exit "${FAKE_PIP_RC:-0}"
"""


def _fake_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, body in (("python", "#!/usr/bin/env bash\necho 'Python 3.11.7 (fake)'\n"), ("pip", FAKE_PIP)):
        (venv / "bin" / name).write_text(body)
        (venv / "bin" / name).chmod(0o755)
    return venv


def _bash(script: str, venv: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; source scripts/venv.sh; {script}"], cwd=ROOT,
                          env={**os.environ, "VENV": str(venv), **env}, capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_failed_install_is_not_stamped_and_a_complete_one_is(tmp_path):
    venv = _fake_venv(tmp_path)
    failed = _bash('ensure_venv "$VENV" requirements.txt', venv, FAKE_PIP_RC="1")
    assert failed.returncode != 0 and "not marked installed" in failed.stderr
    assert not (venv / ".toklab-requirements.txt.sha256").exists()
    assert _bash('ensure_venv "$VENV" requirements.txt', venv).returncode == 0
    assert _bash('venv_current "$VENV" requirements.txt', venv).returncode == 0
    again = _bash('ensure_venv "$VENV" requirements.txt', venv)
    assert "no pip run" in again.stdout
    assert _bash('venv_current "$VENV" requirements-llama.txt', venv).returncode != 0


def _wait_gone(path: Path) -> None:
    for _ in range(200):
        if not path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} is still there")


def test_the_llama_build_runs_in_the_background_and_says_what_it_is_doing(tmp_path, monkeypatch):
    venv = _fake_venv(tmp_path)
    log = tmp_path / "llama.log"
    building = venv / ".toklab-requirements-llama.txt.building"
    hold = tmp_path / "release"
    run = _bash(f'build_in_background "$VENV" requirements-llama.txt {log}', venv, FAKE_PIP_HOLD=str(hold))
    assert run.returncode == 0  # returned while pip still runs: the server starts now
    for _ in range(200):
        if building.exists():
            break
        time.sleep(0.05)
    state = llamacpp.build_state(venv)
    assert state.startswith("llama.cpp is still being built (started ") and "llama.log" in state
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError
    with pytest.raises(ModelLoadError, match="still being built"):
        llamacpp.require_llama_cpp()
    hold.touch()  # pip ends: the build is complete
    _wait_gone(building)
    assert (
        venv / ".toklab-requirements-llama.txt.sha256"
    ).is_file() and "fake pip install" in log.read_text()
    assert llamacpp.build_state(venv) == ""
    # a failed build: said so, with its log and how to install by hand; no stamp
    (venv / ".toklab-requirements-llama.txt.sha256").unlink()
    _bash(f'build_in_background "$VENV" requirements-llama.txt {log}', venv, FAKE_PIP_RC="1")
    failed = venv / ".toklab-requirements-llama.txt.failed"
    for _ in range(100):
        if failed.exists():
            break
        time.sleep(0.05)
    _wait_gone(building)
    with pytest.raises(ModelLoadError, match="build of llama.cpp failed .*requirements-llama.txt"):
        llamacpp.require_llama_cpp()
    assert not (venv / ".toklab-requirements-llama.txt.sha256").exists()


def test_without_any_build_the_message_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(
        ModelLoadError, match="llama-cpp-python is not installed .*requirements-llama.txt.*3–10 min"
    ):
        llamacpp.require_llama_cpp()


def test_start_serves_without_waiting_for_llama_and_the_suite_installs_it():
    start = (ROOT / "scripts" / "start.sh").read_text(encoding="utf-8")
    assert (
        start.index('ensure_venv "$VENV" requirements.txt')
        < start.index("build_in_background")
        < start.index("exec ")
    )
    pins = [
        line
        for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if not line.startswith("#")
    ]
    assert not [p for p in pins if "llama" in p or "diskcache" in p]
    assert "-r requirements-llama.txt" in (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert "requirements-llama.txt" in (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
