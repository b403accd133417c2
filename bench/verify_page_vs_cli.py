"""Under-trained verification: seconds per candidate in the page (AppTest, the page's own code path) and in the
engine call the CLI makes (`undertrained --verify K`), same model, same candidates, same run.

    python bench/verify_page_vs_cli.py [--k 10]          # needs the SmolLM2 demo model (fetch-models)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from _results import Run, variant_from  # noqa: E402

from analysis.methods import undertrained as ut  # noqa: E402
from analysis.model.demo_models import DEMO_MODELS, weights_path  # noqa: E402
from analysis.model.source import resolve_model, tokenizer_for_model  # noqa: E402


def cli_path(model: str, k: int) -> float:
    """The CLI's calls: analyze, then verify_result placing the model itself; seconds per candidate."""
    tok = tokenizer_for_model(resolve_model(model))
    res = ut.analyze(model, tok)
    t0 = time.perf_counter()
    ut.verify_result(res, model, tok, k)
    print(f"  cli: load {res.timings['load_lm']:.2f} s, verify {res.timings['verify']:.2f} s")
    return res.timings["verify_per_candidate"], time.perf_counter() - t0


def page_path(k: int) -> tuple[float, float]:
    """The page: first fetched demo model, Compute, Verify k; seconds per candidate from the page's metric."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    at.switch_page("pages/undertrained.py").run()
    at.button(key="ut-run").click().run()
    at.number_input(key="ut-k").set_value(k).run()
    t0 = time.perf_counter()
    at.button(key="ut-verify").click().run()
    wall = time.perf_counter() - t0
    assert not at.exception, [e.message for e in at.exception]
    per = next(m.value for m in at.metric if m.label == "Per candidate")
    return float(per.removesuffix(" ms")) / 1e3, wall


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    model = str(weights_path(DEMO_MODELS[0]))
    p, pw = page_path(args.k)
    c, cw = cli_path(model, args.k)
    print(
        f"per candidate: page {p:.3f} s (click→done {pw:.1f} s), cli {c:.3f} s (incl. load {cw:.1f} s); "
        f"ratio {p / c:.2f}"
    )
    run.write({"model": DEMO_MODELS[0], "k": args.k, "page_per_candidate_s": round(p, 4), "page_click_to_done_s": round(pw, 2),
               "cli_per_candidate_s": round(c, 4), "cli_with_load_s": round(cw, 2), "ratio": round(p / c, 3)},
              targets={"ratio": "<= 1.5"}, met=p / c <= 1.5)  # fmt: skip
