"""The server launcher (`scripts/serve.py`, what `scripts/start.sh` runs): its warm-up imports what it names and
leaves the embedded default in the app's shared cache, so the first request of a fresh server does not load it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import ROOT

PROBE = """
import sys, time
sys.path.insert(0, 'scripts')
import serve
serve.warm()
assert all(m in sys.modules for m in serve.WARM_MODULES), [m for m in serve.WARM_MODULES if m not in sys.modules]
import analysis.tokenizer.defaults as d
calls = []
real = d.default_tokenizer
d.default_tokenizer = lambda: calls.append(1) or real()
import ui.loaders
ui.loaders.default_tokenizer = d.default_tokenizer
tok = ui.loaders.load_default()
assert calls == [], "the default was loaded again: the warm-up did not fill the shared cache"
print(tok.name)
"""


@pytest.mark.slow
def test_warm_up_fills_the_shared_cache_and_says_nothing():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warm-up skipped" not in done.stderr and done.stdout.strip()


def test_start_script_and_browser_tests_use_the_launcher():
    assert "scripts/serve.py" in (ROOT / "scripts" / "start.sh").read_text()
    assert '"serve.py"' in (ROOT / "tests" / "e2e" / "conftest.py").read_text()


PAGES_PROBE = """
import sys
sys.path.insert(0, 'scripts')
import serve
from streamlit.runtime.pages_manager import PagesManager
serve.warm()
assert 'ui' in sys.modules  # the hand-over in ui/__init__.py has had its one chance, outside any run
serve.leave_legacy_pages_mode()
PagesManager('app.py')  # what the server builds for its first session
print(PagesManager.uses_pages_directory)
"""


@pytest.mark.slow
def test_the_launcher_never_enters_the_legacy_pages_mode():
    """A fresh server's first deep link must run inside app.py's frame: the launcher imports `ui` before the server
    starts, so the legacy pages/ mode must be off before the server's PagesManager would switch it on."""
    done = subprocess.run(
        [sys.executable, "-c", PAGES_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_the_server_skips_the_full_collection_after_every_run():
    """Streamlit, as the server reads its options from the repository root, does not run a full garbage collection
    after each script run (0.3 s a click once torch is imported; see .streamlit/config.toml)."""
    probe = "from streamlit import config; config.get_config_options(force_reparse=True); "
    probe += "print(config.get_option('runner.postScriptGC'))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


SERVER_PROBE = """
import uvicorn
from streamlit.web import bootstrap
config = uvicorn.Config(app=None)
config.load()
print(config.http_protocol_class.__name__, bootstrap._get_uvloop_loop_factory() is not None)
"""


def test_the_server_runs_on_httptools_and_uvloop():
    """Streamlit's uvicorn server takes its fast path (requirements.txt): HTTP parsed by httptools, not pure-Python
    h11, and the event loop on uvloop. Without them a new browser's first view of any page took 0.3-0.4 s longer on
    two cores, most of it spent serving the front end's 61 files."""
    done = subprocess.run(
        [sys.executable, "-c", SERVER_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["HttpToolsProtocol", "True"], done.stdout


def test_the_server_runs_on_the_c_allocator_unless_the_operator_chose():
    """`use_system_allocator` starts the process again once with PYTHONMALLOC=malloc (arenas of closed sessions
    then go back to the system); an operator's PYTHONMALLOC is kept, and the workers never get the server's."""
    code = ("import os, sys; sys.path.insert(0, 'scripts'); import serve; serve.use_system_allocator(); "
            "print(os.environ.get('PYTHONMALLOC'), os.environ.get(serve.OWN_PYTHONMALLOC))")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONMALLOC", "TOKLAB_SERVER_PYTHONMALLOC")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.split()[-2:] == ["malloc", "1"], done.stderr[-2000:]
    env["PYTHONMALLOC"] = "pymalloc"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.split()[-2:] == ["pymalloc", "None"], done.stderr[-2000:]
