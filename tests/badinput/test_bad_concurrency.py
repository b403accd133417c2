"""Identical concurrent work runs once and is shared: eight sessions pressing Compute on one Compression job, an
engine `memoize` function, and the page caches (`ui.caching`, Streamlit's per-key compute lock)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import load_shared

from analysis.core.cache import memoize
from analysis.measure import grid
from analysis.texts.flores import open_flores
from ui.caching import cache_resource

SESSIONS = 8


def _together(fn):
    """Run `fn` in SESSIONS threads released at the same moment; returns their results."""
    barrier = threading.Barrier(SESSIONS)

    def session():
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(SESSIONS) as ex:
        futures = [ex.submit(session) for _ in range(SESSIONS)]
        return [f.result() for f in futures]


def test_eight_sessions_pressing_compute_compute_once(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    grid.clear_cache()
    tok = load_shared("gpt2")
    data = open_flores(None)
    langs = ["est_Latn", "fin_Latn", "eng_Latn"]
    calls: Counter[str] = Counter()
    lock = threading.Lock()
    real = grid._compute_language

    def counted(tok, data, code, key, power):
        with lock:
            calls[code] += 1
        return real(tok, data, code, key, power)

    monkeypatch.setattr(grid, "_compute_language", counted)
    rows = _together(lambda: grid.compression_table([tok], data, langs, power=2.5, reference="eng_Latn"))
    assert calls == Counter(dict.fromkeys(langs, 1)), calls  # each cell computed once for eight sessions
    assert all(r == rows[0] for r in rows)
    grid.clear_cache()


def test_memoize_runs_identical_concurrent_calls_once():
    calls = Counter()
    gate = threading.Event()

    @memoize(maxsize=2)
    def heavy(x: int) -> list[int]:
        calls[x] += 1
        gate.wait(10)  # hold the first caller until every session has asked
        return [x] * 3

    def ask():
        if not gate.is_set():
            threading.Timer(0.5, gate.set).start()
        return heavy(7)

    results = _together(ask)
    assert calls[7] == 1 and all(r is results[0] for r in results)


@pytest.mark.filterwarnings("ignore")
def test_page_caches_compute_once():
    """Pages cache their heavy calls with ui.caching (st.cache_resource/cache_data): one computation per key."""

    calls = Counter()
    gate = threading.Event()

    @cache_resource(show_spinner=False)
    def order(tok, n: int) -> tuple[str, int]:
        calls[n] += 1
        gate.wait(10)
        return tok.name, n

    tok = load_shared("gpt2")

    def ask():
        if not gate.is_set():
            threading.Timer(0.5, gate.set).start()
        return order(tok, 3)

    results = _together(ask)
    assert calls[3] == 1 and all(r == ("gpt2", 3) for r in results)
