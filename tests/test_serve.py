"""The server launcher (`scripts/serve.py`, what `scripts/start.sh` runs): its warm-up imports what it names and
leaves the embedded default in the app's shared cache, so the first request of a fresh server does not load it."""

from __future__ import annotations

import subprocess
import sys

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


def test_warm_up_fills_the_shared_cache_and_says_nothing():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warm-up skipped" not in done.stderr and done.stdout.strip()


def test_start_script_and_browser_tests_use_the_launcher():
    assert "scripts/serve.py" in (ROOT / "scripts" / "start.sh").read_text()
    assert '"serve.py"' in (ROOT / "tests" / "e2e" / "conftest.py").read_text()
