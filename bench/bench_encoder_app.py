"""Benchmark: the app's Compression page, 4 tokenizers × 204 FLORES languages cold, the fast encoder against
tokenizers, in one run.

The real page through Streamlit's AppTest (the app.py frame, the page's own code path: `grid.compression_table`,
the charts, the tables): the tokenizers are added from the sidebar's *Add an example* (on Home) (Llama-3.1, Qwen3, Gemma,
Mistral-Nemo by default), picked under *Tokenizers*, *Languages: All* chosen, and the time runs from the click on
**Compute** to the end of that script run (every result drawn). Each variant runs in a new process with a fresh
``TOKLAB_CACHE`` (compression results and the fast encoder's verdicts, which live in its ``store/encoder``) and a
fresh ``TOKLAB_DATA`` (workspaces), so nothing measured before is read back:

* ``tokenizers``: ``TOKLAB_ENCODER=tokenizers`` (what every click did before the fast encoder);
* ``first``: no stored verdict: tokenizers encodes every cell and gigatoken's ids of each whole FLORES language
  are compared on the side; after the last language the code corpus and the hostile set are compared and the
  verdict is stored (the first click ever on a tokenizer);
* ``verified``: a fresh cache holding only the verdicts of ``first`` (copied from its ``store/encoder``; any
  tokenizer whose verification the chosen languages did not finish is verified in a process of its own before),
  no compression results: every later cold click.

Every variant must draw the same results table (every metric of every tokenizer × language, compared as text at
full precision). Figures: click→result seconds, the process's memory before the click and its peak (RSS), and
the encoder the page reports for each tokenizer.

    python bench/bench_encoder_app.py [--tokenizers llama-3.1,qwen3,gemma,mistral-nemo] [--langs all]

Writes bench/results/bench_encoder_app[-variant].json through bench/_results.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.measure import fast_encode as fe  # noqa: E402

TOKENIZERS = "llama-3.1,qwen3,gemma,mistral-nemo"
VARIANTS = ("tokenizers", "first", "verified")
#: A script run of the page may take this long (4 × 204 cells with tokenizers on a busy machine take minutes).
RUN_TIMEOUT_S = 3600
#: Verifies one tokenizer (what a FLORES-wide measurement of it does) and prints its verdict.
VERIFY = (
    "import json, sys\n"
    "from analysis import load\n"
    "from analysis.measure import fast_encode as fe\n"
    "print(json.dumps(fe.verify(load(sys.argv[1]))))\n"
)


def rss_mb() -> float:
    """This process's resident memory now (MB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def page_child(names: list[str], langs: str, table_csv: Path) -> dict:
    """In this (fresh) process: open the Compression page, add and pick the tokenizers and languages, click
    Compute; the seconds from the click to the drawn results, memory, the encoders shown. The results table goes
    to `table_csv` (full precision) for the parent to compare."""
    t0 = time.perf_counter()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=RUN_TIMEOUT_S)
    at.run()  # Home
    for name in names:  # as a user adds them: the sidebar's example picker
        at.sidebar.selectbox(key="sidebar-example").select(name).run()
        at.sidebar.button(key="sidebar-add").click().run()
    at.switch_page("pages/compression.py").run()
    at.multiselect(key="cmp-toks").set_value(names).run()
    if langs == "all":
        at.radio(key="cmp-mode").set_value("All").run()
    else:
        at.multiselect(key="cmp-langs").set_value([c.strip() for c in langs.split(",") if c.strip()]).run()
    if at.exception:
        raise SystemExit(f"the page failed before the click: {[e.message for e in at.exception]}")
    setup_s = time.perf_counter() - t0
    before = rss_mb()
    t0 = time.perf_counter()
    at.button(key="cmp-run").click().run()
    click_s = time.perf_counter() - t0
    if at.exception:
        raise SystemExit(f"the page failed: {[e.message for e in at.exception]}")
    tables = [
        d.value for d in at.dataframe if {"tokenizer", "lang", "bytes_per_token"} <= set(d.value.columns)
    ]
    if not tables:
        raise SystemExit("the results table was not drawn")
    table = tables[0]
    table.to_csv(table_csv, index=False, float_format="%r")
    (caption,) = [c.value for c in at.caption if c.value.startswith("Encoder")]
    return {
        "setup_s": setup_s,
        "click_s": click_s,
        "rss_before_click_mb": before,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cells": len(table),
        "encoders": caption,
    }


def env_for(cache: Path, data: Path, **extra: str) -> dict[str, str]:
    """A child's environment: this one, with its own disk cache and workspace store, no stray encoder switch."""
    env = {k: v for k, v in os.environ.items() if k != fe.ENV_SWITCH}
    return {**env, "TOKLAB_CACHE": str(cache), "TOKLAB_DATA": str(data), "PYTHONPATH": str(ROOT), **extra}


def run_page(args: argparse.Namespace, scratch: Path, how: str, cache: Path, **extra: str) -> dict:
    """One variant in a new process; its figures (and where its table went)."""
    table = scratch / f"{how}.csv"
    argv = [
        sys.executable,
        __file__,
        "--child",
        str(table),
        "--tokenizers",
        args.tokenizers,
        "--langs",
        args.langs,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(
        argv, env=env_for(cache, scratch / f"data-{how}", **extra), capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the {how} run failed: {proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_s": wall, "table": table}


def main() -> None:
    """Run the three variants, compare their tables, print the figures and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--tokenizers", default=TOKENIZERS, help=f"shared examples, comma-separated (default {TOKENIZERS})"
    )
    ap.add_argument("--langs", default="all", help="'all' (default) or comma-separated FLORES codes")
    ap.add_argument("--scratch", default=None, help="folder for the caches (default a temporary one)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = [n.strip() for n in args.tokenizers.split(",") if n.strip()]
    if args.child:
        print(json.dumps(page_child(names, args.langs, Path(args.child))))
        return
    missing = [n for n in names if not (assets_dir() / "tokenizers" / n).is_dir()]
    if not names or missing:
        raise SystemExit(f"error: not a shared example tokenizer: {', '.join(missing) or '(none given)'}")
    run = Run(__file__, variant=variant_from(ap, args, ignore=["child"]))
    scratch = Path(tempfile.mkdtemp(prefix="bench-encoder-app-", dir=args.scratch))
    try:
        runs = {
            "tokenizers": run_page(
                args, scratch, "tokenizers", scratch / "cache-ref", **{fe.ENV_SWITCH: "tokenizers"}
            )
        }
        runs["first"] = run_page(args, scratch, "first", scratch / "cache-first")
        kept = scratch / "cache-verified"
        shutil.copytree(scratch / "cache-first" / "store" / "encoder", kept / "store" / "encoder")
        t0 = time.perf_counter()
        for n in names:  # a no-op for a tokenizer the first run verified (all languages)
            proc = subprocess.run([sys.executable, "-c", VERIFY, str(assets_dir() / "tokenizers" / n)],
                                  env=env_for(kept, scratch / "data-verify"), capture_output=True, text=True)  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(f"verifying {n} failed: {proc.stderr[-3000:]}")
        verify_after_s = time.perf_counter() - t0
        runs["verified"] = run_page(args, scratch, "verified", kept)
        reference = runs["tokenizers"]["table"].read_text(encoding="utf-8")
        same = {how: r["table"].read_text(encoding="utf-8") == reference for how, r in runs.items()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = runs["tokenizers"]["click_s"]
    figures: dict = {"versions": fe.versions(), "tokenizers": names, "languages": args.langs, "runs": [],
                     "encoders": {}}  # fmt: skip
    for how, r in runs.items():
        figures["runs"].append({
            "variant": how,
            "click_to_result_s": round(r["click_s"], 2),
            "ratio_to_tokenizers": round(r["click_s"] / base, 3),
            "setup_s": round(r["setup_s"], 1),
            "process_s": round(r["process_s"], 1),
            "rss_before_click_mb": round(r["rss_before_click_mb"]),
            "maxrss_mb": round(r["maxrss_mb"]),
            "cells": r["cells"],
            "table_identical": same[how],
        })  # fmt: skip
        figures["encoders"][how] = r["encoders"].split(": ", 1)[1]  # the page's caption, after its label
        print(f"Compression page ({how:10}): click→result {r['click_s']:7.1f} s ({r['click_s'] / base:.2f}×), "
              f"{r['cells']} cells, RSS {r['rss_before_click_mb']:.0f} MB before the click, peak {r['maxrss_mb']:.0f} MB; "
              f"table identical: {same[how]}")  # fmt: skip
        print(f"  {r['encoders']}")
    figures["verify_after_first_s"] = round(verify_after_s, 1)
    if args.langs != "all" or args.tokenizers != TOKENIZERS:
        print(
            "full size: python bench/bench_encoder_app.py  (4 tokenizers × 204 languages; alone on the machine)"
        )
    run.write(figures, targets={"table_identical": "all variants"}, met=all(same.values()))


if __name__ == "__main__":
    main()
