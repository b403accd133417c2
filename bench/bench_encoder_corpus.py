"""Benchmark: `corpus-stats --stat compression` on 1 GB of text, the fast encoder against tokenizers, in one run.

The token-count statistic of the corpus jobs that encodes through `analysis.measure.fast_encode.encode_ids`
(``compression``: per file, the token count, bytes/token, fertility, Rényi efficiency … from every id's count;
``token-ids`` counts ids with special tokens through tokenizers itself and is not routed to the fast encoder).

The corpus: about ``--corpus-mb`` MB (default 1024) of plain-text shards generated deterministically (seed 0) into
a temporary folder (never the repository) from the FLORES-200 devtest lines of all 204 languages and the shared
text corpora (`bench_corpus.synthetic_corpus`: lines drawn at random, so most lines occur many times — both
encoders' word caches are warm after the first few MB); the files are read once before the runs so that both
find them in the page cache.

Each variant is the whole command in a new process (`python -m analysis corpus-stats --tokenizer T --text DIR
--stat compression --out FILE --json`, the executor `auto` unless ``--executor`` says otherwise: the local
executor on every core above 256 MB) with its own fresh ``TOKLAB_CACHE`` (no stored verdicts, no job folder to
resume):

* ``tokenizers``: ``TOKLAB_ENCODER=tokenizers`` (what every run did before the fast encoder);
* ``fast``: the tokenizer first verified in a process of its own (`fast_encode.verify`: every FLORES devtest line,
  the code corpus, the hostile set; timed as ``verify_s``, a one-time cost per tokenizer and version pair), then
  the command with that verdict. A corpus that is not FLORES never verifies a tokenizer by itself: without a
  verdict, ``corpus-stats`` encodes with tokenizers.

Figures: wall time, MB/s, peak RSS (the command's process and the largest of its workers) of each; the ``--out``
files must be byte-identical (every group's every metric, so every id's count) and so must the token counts.

    python bench/bench_encoder_corpus.py [--corpus-mb 1024] [--tokenizer llama-3.1] [--executor auto]

Writes bench/results/bench_encoder_corpus[-variant].json through bench/_results.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402
from bench_corpus import synthetic_corpus  # noqa: E402

from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.measure import fast_encode as fe  # noqa: E402

#: The command in a child that reports its own peak memory and its children's (local workers) on stderr's last line.
CHILD = (
    "import json, resource, sys\n"
    "from analysis.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "self_, kids = (resource.getrusage(w).ru_maxrss / 1024 for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
    "print(json.dumps({'rc': rc, 'maxrss_mb': self_, 'children_maxrss_mb': kids}), file=sys.stderr)\n"
)
#: Verifies one tokenizer (what the first FLORES-wide measurement of a tokenizer does) and prints its verdict.
VERIFY = (
    "import json, sys\n"
    "from analysis import load\n"
    "from analysis.measure import fast_encode as fe\n"
    "print(json.dumps(fe.verify(load(sys.argv[1]))))\n"
)


def env_for(cache: Path, **extra: str) -> dict[str, str]:
    """A child's environment: this one, with its own disk cache and without a stray encoder switch."""
    env = {k: v for k, v in os.environ.items() if k != fe.ENV_SWITCH}
    return {**env, "TOKLAB_CACHE": str(cache), "PYTHONPATH": str(ROOT), **extra}


def corpus_stats(tokenizer: str, corpus: Path, out: Path, cache: Path, executor: str, **extra: str) -> dict:
    """Time the whole corpus-stats command in a new process; its summary, peak memory and wall time."""
    argv = [sys.executable, "-c", CHILD, "corpus-stats", "--tokenizer", tokenizer, "--text", str(corpus),
            "--stat", "compression", "--out", str(out), "--json", "--quiet", "--executor", executor]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env_for(cache, **extra), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"corpus-stats failed: {proc.stderr[-3000:]}")
    mem = json.loads(proc.stderr.strip().splitlines()[-1])
    return {"wall_s": wall, "summary": json.loads(proc.stdout), **mem}


def main() -> None:
    """Generate the corpus, run both variants, compare, print the figures and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--corpus-mb", type=int, default=1024, help="size of the generated corpus in MB (default 1024)"
    )
    ap.add_argument("--shards", type=int, default=16, help="files the corpus is written as (default 16)")
    ap.add_argument(
        "--tokenizer", default="llama-3.1", help="a shared tokenizer's name or a folder (default llama-3.1)"
    )
    ap.add_argument("--executor", default="auto", help="corpus-stats --executor (default auto)")
    ap.add_argument(
        "--scratch", default=None, help="folder for the corpus and caches (default a temporary one)"
    )
    args = ap.parse_args()
    if args.corpus_mb < 1 or args.shards < 1:
        raise SystemExit("error: --corpus-mb and --shards must be at least 1")
    run = Run(__file__, variant=variant_from(ap, args))
    named = assets_dir() / "tokenizers" / args.tokenizer
    tokenizer = str(named if named.is_dir() else Path(args.tokenizer))
    scratch = Path(tempfile.mkdtemp(prefix="bench-encoder-corpus-", dir=args.scratch))
    try:
        t0 = time.perf_counter()
        files = synthetic_corpus(scratch / "corpus", args.corpus_mb, args.shards)
        size = sum(p.stat().st_size for p in files)
        for p in files:  # both runs find the files in the page cache
            with p.open("rb") as f:
                while f.read(1 << 24):
                    pass
        print(
            f"corpus: {len(files)} files, {size / 1e6:,.1f} MB in {time.perf_counter() - t0:.1f} s ({scratch})"
        )

        ref = corpus_stats(tokenizer, scratch / "corpus", scratch / "ref.json", scratch / "cache-ref",
                           args.executor, **{fe.ENV_SWITCH: "tokenizers"})  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", VERIFY, tokenizer], env=env_for(scratch / "cache-fast"),
                              capture_output=True, text=True)  # fmt: skip
        verify_s = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"verification failed: {proc.stderr[-3000:]}")
        verdict = json.loads(proc.stdout)
        fast = corpus_stats(
            tokenizer, scratch / "corpus", scratch / "fast.json", scratch / "cache-fast", args.executor
        )
        identical_out = (scratch / "ref.json").read_bytes() == (scratch / "fast.json").read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def tokens(r: dict) -> int:
        return sum(g["tokens"] for g in r["summary"]["groups"].values())

    same_tokens = {g: row["tokens"] for g, row in ref["summary"]["groups"].items()} == {
        g: row["tokens"] for g, row in fast["summary"]["groups"].items()
    }
    variants = []
    for how, r in (("tokenizers", ref), ("fast", fast)):
        variants.append({
            "variant": how,
            "wall_s": round(r["wall_s"], 2),
            "mb_s": round(size / 1e6 / r["wall_s"], 2),
            "maxrss_mb": round(r["maxrss_mb"]),
            "workers_maxrss_mb": round(r["children_maxrss_mb"]),
            "executor": r["summary"].get("executor"),
            "tokens": tokens(r),
        })  # fmt: skip
        print(f"corpus-stats ({how:10}): {r['wall_s']:7.1f} s, {size / 1e6 / r['wall_s']:7.2f} MB/s, "
              f"{tokens(r):,} tokens, executor {r['summary'].get('executor')}; peak RSS {r['maxrss_mb']:.0f} MB "
              f"(largest worker {r['children_maxrss_mb']:.0f} MB)")  # fmt: skip
    speedup = ref["wall_s"] / fast["wall_s"]
    print(f"fast encoder: {verdict.get('encoder')} ({verdict.get('encoder_reason', '')}); verification {verify_s:.1f} s "
          f"(once per tokenizer); speed-up {speedup:.2f}×; token counts identical: {same_tokens}; "
          f"--out files byte-identical: {identical_out}")  # fmt: skip
    if args.corpus_mb != 1024:
        print("full size: python bench/bench_encoder_corpus.py  (1 GB; alone on the machine)")
    figures = {
        "versions": fe.versions(),
        "tokenizer": args.tokenizer,
        "corpus_mb": round(size / 1e6, 1),
        "files": len(files),
        "stat": "compression",
        "runs": variants,
        "verify_s": round(verify_s, 1),
        "encoder": verdict,
        "speedup": round(speedup, 2),
        "identical_counts": same_tokens,
        "identical_out_files": identical_out,
    }
    run.write(figures, targets={"identical_counts": True, "identical_out_files": True},
              met=same_tokens and identical_out)  # fmt: skip


if __name__ == "__main__":
    main()
