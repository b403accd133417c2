"""Time page paths against their engine calls: the Extend slider (one rerun per move) and the Playground's update
with four tokenizers. Run: python bench/page_paths.py (prints seconds; no assertions)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _results import Run  # noqa: E402
from support import load_shared  # noqa: E402


def extend_slider(
    tok_name: str = "gpt2", moves: tuple[int, ...] = (50, 120, 300, 700, 1000, 20, 450)
) -> dict:
    """Seconds per slider move on the Extend page after training (the page rerun), and the engine's `at`."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.switch_page("pages/extend.py").run()
    at.session_state["toklab_library"] = {
        **at.session_state["toklab_library"],
        tok_name: load_shared(tok_name),
    }
    at.run()
    at.selectbox(key="ext-tok").set_value(tok_name).run()
    at.multiselect(key="ext-corpora").set_value([]).run()
    at.number_input(key="ext-nmax").set_value(1000).run()
    at.button(key="ext-train").click().run()
    assert not at.exception, [e.message for e in at.exception]
    times = []
    for n in moves:
        t0 = time.perf_counter()
        at.slider(key="ext-n").set_value(n).run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, [e.message for e in at.exception]
    print(
        f"extend slider ({tok_name}, 3 methods): per move median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s  {[round(t, 2) for t in times]}"
    )
    return {"tokenizer": tok_name, "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
            "moves_s": [round(t, 3) for t in times]}  # fmt: skip


def playground(names: tuple[str, ...] = ("gpt2", "llama-3.1", "qwen3", "mistral-7b-v0.3")) -> dict:
    """Seconds per text update on the Playground with four tokenizers (live mode)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["t"] = [f"example:{n}" for n in names]
    at.switch_page("pages/playground.py").run()
    at.toggle(key="pg-live").set_value(True).run()
    text = "Tokenizers split naïve words differently: tere hommikust, 東京, Привет! "
    times = []
    for k in range(1, 9):
        t0 = time.perf_counter()
        at.text_input(key="pg-live-text").set_value(text * k).run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, [e.message for e in at.exception]
    print(
        f"playground update (4 tokenizers): median {statistics.median(times):.3f} s, max {max(times):.3f} s"
    )
    return {
        "tokenizers": list(names),
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
    }


if __name__ == "__main__":
    which = sys.argv[1:] or ["extend", "playground"]
    run = Run(__file__, variant=None if set(which) == {"extend", "playground"} else "-".join(which))
    figures = {}
    if "playground" in which:
        figures["playground_update"] = playground()
    if "extend" in which:
        figures["extend_slider"] = extend_slider()
    run.write(figures, targets={"extend_slider.max_s": "<= 0.5"},
              met=figures["extend_slider"]["max_s"] <= 0.5 if "extend_slider" in figures else None)  # fmt: skip
