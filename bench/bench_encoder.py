"""Benchmark: the fast encoder of bulk measurement (analysis.measure.fast_encode) against tokenizers, in one run.

1. The bare tokenizers encode (`encode_batch_fast`, no special tokens, one call per language, in this process, the
   tokenizers already loaded) of every FLORES-200 devtest line for 2 tokenizers (Llama-3.1, Qwen3): the baseline.
2. The whole `python -m analysis compress -t … -t … --langs all --json` command (a new process: start, loads,
   FLORES, metrics, cache writes) with a fresh disk cache, three ways:
   * ``reference``: ``TOKLAB_ENCODER=tokenizers`` (what every run did before the fast encoder);
   * ``first``: no stored verdict (tokenizers encodes and gigatoken's ids are compared on the side; the run
     verifies both tokenizers: every FLORES line, the code corpus, the hostile set);
   * ``verified``: the verdicts of ``first`` kept, the compression results removed (the target: ≤ 0.5× the
     bare encode, with identical counts).
   Each prints the same rows; the bench checks that every row's token count equals the bare encode's.
3. Single-thread MB/s of both encoders on FLORES English, Chinese and Thai (a child process with
   TOKENIZERS_PARALLELISM=false and RAYON_NUM_THREADS=1; gigatoken with parallel=False), best of 3.
4. Memory: peak RSS of each compress process, and the RSS a loaded gigatoken tokenizer adds.

Writes bench/results/bench_encoder.json through bench/_results.py (date, commit, machine, load average, figures).
Usage: `python bench/bench_encoder.py [--skip-reference]`. The app's Compression page cold (4 tokenizers × 204
languages) is bench/bench_encoder_app.py; `corpus-stats` on 1 GB of text is bench/bench_encoder_corpus.py.
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

from analysis import load  # noqa: E402
from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.measure import fast_encode as fe  # noqa: E402
from analysis.texts.flores import open_flores  # noqa: E402

NAMES = ("llama-3.1", "qwen3")
ST_LANGS = ("eng_Latn", "zho_Hans", "tha_Thai")

#: the child that runs the compress command and reports its own peak memory on stderr's last line
CHILD = (
    "import json, resource, sys\n"
    "from analysis.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print(json.dumps({'rc': rc, 'maxrss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),"
    " file=sys.stderr)\n"
)


def best_of(fn, repeats: int = 3) -> float:
    """Fastest wall time of `repeats` calls."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def single_thread(paths: list[str]) -> dict[str, dict]:
    """MB/s of both encoders on one thread (run in a child whose thread pools were limited before they started).

    Both encoders are built fresh and warmed up once on another language (gigatoken builds its tables on its first
    call), then each language is timed on its first pass (`unseen`: text the encoders' word caches have not seen,
    the case of a new corpus) and as the best of 3 passes after it (`repeat`: the caches warm)."""
    data = open_flores()
    out = {}
    for path in paths:
        tok = load(path)
        rust = tok.fresh_tokenizer()
        fast, _ = fe._load_fast.__wrapped__(tok)  # a new gigatoken tokenizer: empty caches
        t0 = time.perf_counter()
        warm = data.lines("fra_Latn")
        if fast is not None:
            fast.encode_batch(warm, parallel=False)
        first_call = time.perf_counter() - t0
        rust.encode_batch_fast(warm, add_special_tokens=False)
        for lang in ST_LANGS:
            lines = data.lines(lang)
            mb = sum(len(s.encode("utf-8")) for s in lines) / 1e6
            row: dict[str, float | None] = {
                "mb": round(mb, 3),
                "gigatoken_first_call_s": round(first_call, 3),
            }
            for how, repeats in (("unseen", 1), ("repeat", 3)):
                t_ref = best_of(lambda: rust.encode_batch_fast(lines, add_special_tokens=False), repeats)  # noqa: B023
                t_fast = best_of(lambda: fast.encode_batch(lines, parallel=False), repeats) if fast else None  # noqa: B023
                row[f"tokenizers_mb_s_{how}"] = round(mb / t_ref, 2)
                row[f"gigatoken_mb_s_{how}"] = round(mb / t_fast, 2) if t_fast else None
                row[f"speedup_{how}"] = round(t_ref / t_fast, 1) if t_fast else None
            out[f"{tok.name}/{lang}"] = row
    return out


def rss_mb() -> float:
    """This process's resident memory now (MB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def env_for(cache: Path, **extra: str) -> dict[str, str]:
    """The child's environment: this one, with its own disk cache."""
    env = {k: v for k, v in os.environ.items() if k != fe.ENV_SWITCH}
    return {**env, "TOKLAB_CACHE": str(cache), "PYTHONPATH": str(ROOT), **extra}


def run_compress(paths: list[str], cache: Path, **extra: str) -> dict:
    """Time the whole compress command in a new process; its rows and peak memory."""
    argv = [sys.executable, "-c", CHILD, "compress", *[x for p in paths for x in ("-t", p)], "--langs", "all"]
    t0 = time.perf_counter()
    proc = subprocess.run([*argv, "--json"], env=env_for(cache, **extra), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"compress failed: {proc.stderr[-2000:]}")
    info = json.loads(proc.stderr.strip().splitlines()[-1])
    rows = json.loads(proc.stdout)
    return {"wall_s": round(wall, 2), "maxrss_mb": round(info["maxrss_mb"]), "rows": rows}


def main() -> None:
    """Run the benchmark, print the figures and write the JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--skip-reference", action="store_true", help="skip the TOKLAB_ENCODER=tokenizers compress run"
    )
    ap.add_argument("--single-thread-child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single_thread_child:
        print(json.dumps(single_thread(args.single_thread_child)))
        return
    run = Run(__file__, variant=variant_from(ap, args, ignore=["single_thread_child"]))
    paths = [str(assets_dir() / "tokenizers" / n) for n in NAMES]
    toks = [load(p) for p in paths]
    data = open_flores()
    codes = data.codes
    lines = {c: data.lines(c) for c in codes}
    mb = sum(len(s.encode("utf-8")) for ls in lines.values() for s in ls) / 1e6

    # 1. the bare tokenizers encode of the same lines
    bare_tokens: dict[tuple[str, str], int] = {}
    t0 = time.perf_counter()
    for t in toks:
        rust = fe.reference_tokenizer(t)
        for c in codes:
            enc = rust.encode_batch_fast(lines[c], add_special_tokens=False)
            bare_tokens[(t.name, c)] = sum(len(e.ids) for e in enc)
    bare = time.perf_counter() - t0
    print(f"bare tokenizers encode_batch_fast: {bare:.1f} s for 2 × {len(codes)} languages ({2 * mb:.0f} MB)")

    # memory a loaded gigatoken tokenizer adds
    r0 = rss_mb()
    fast = [fe._load_fast(t)[0] for t in toks]
    gt_load_mb = rss_mb() - r0
    del fast

    # 2. the whole compress command
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-encoder-") as tmp:
        if not args.skip_reference:
            runs["reference"] = run_compress(paths, Path(tmp) / "ref", **{fe.ENV_SWITCH: "tokenizers"})
        cache = Path(tmp) / "fast"
        runs["first"] = run_compress(paths, cache)
        shutil.rmtree(cache / "store" / "compression", ignore_errors=True)  # the verdicts stay
        runs["verified"] = run_compress(paths, cache)
    figures: dict[str, dict] = {}
    for how, r in runs.items():
        counts = {(row["tokenizer"], row["lang"]): row["tokens"] for row in r["rows"]}
        same = counts == bare_tokens
        encoders = sorted({row["encoder"] for row in r["rows"]})
        figures[how] = {
            "wall_s": r["wall_s"],
            "ratio_to_bare": round(r["wall_s"] / bare, 3),
            "identical_counts": same,
            "encoders": encoders,
            "maxrss_mb": r["maxrss_mb"],
        }
        print(
            f"compress ({how:9}): {r['wall_s']:6.1f} s = {r['wall_s'] / bare:.2f}× bare; counts identical: {same}; "
            f"encoder {', '.join(encoders)}; peak RSS {r['maxrss_mb']} MB"
        )
    rows = {(row["tokenizer"], row["lang"]): row for row in runs["verified"]["rows"]}
    if "reference" in runs:
        strip = ("encoder", "encoder_reason")
        ref_rows = {(row["tokenizer"], row["lang"]): row for row in runs["reference"]["rows"]}
        same_rows = all(
            {k: v for k, v in rows[key].items() if k not in strip}
            == {k: v for k, v in r.items() if k not in strip}
            for key, r in ref_rows.items()
        )
        print(f"every metric of every row equal to the tokenizers-only run: {same_rows}")
        figures["rows_equal_to_reference"] = {"value": same_rows}

    # 3. single-thread throughput
    proc = subprocess.run(
        [sys.executable, __file__, "--single-thread-child", *paths],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TOKENIZERS_PARALLELISM": "false",
            "RAYON_NUM_THREADS": "1",
        },
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"single-thread run failed: {proc.stderr[-2000:]}")
    single = json.loads(proc.stdout)
    for k, v in single.items():
        print(
            f"single thread {k:22}: tokenizers {v['tokenizers_mb_s_unseen']:6.2f} / {v['tokenizers_mb_s_repeat']:6.2f} "
            f"MB/s, gigatoken {v['gigatoken_mb_s_unseen']} / {v['gigatoken_mb_s_repeat']} MB/s (unseen / repeated "
            f"text; {v['speedup_unseen']}× / {v['speedup_repeat']}×)"
        )
    print(f"gigatoken tokenizers loaded: +{gt_load_mb:.0f} MB")
    figures_all = {
        "versions": fe.versions(),
        "tokenizers": list(NAMES),
        "languages": len(codes),
        "flores_mb_per_tokenizer": round(mb, 2),
        "bare_encode_s": round(bare, 2),
        "compress": figures,
        "single_thread": [{"tokenizer/language": k, **v} for k, v in single.items()],
        "gigatoken_load_rss_mb": round(gt_load_mb),
        "bench_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    verified = figures["verified"]
    met = (
        verified["ratio_to_bare"] <= 0.5
        and all(f.get("identical_counts", True) for f in figures.values())
        and figures.get("rows_equal_to_reference", {}).get("value", True)
    )
    run.write(
        figures_all, targets={"compress.verified.ratio_to_bare": "<= 0.5", "identical_counts": "all"}, met=met
    )


if __name__ == "__main__":
    main()
