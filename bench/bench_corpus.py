"""Benchmark: corpus statistics in process vs datatrove's local executor with 1 and 2 workers (same run).

Corpora: all 204 FLORES-200 devtest files (read in place) and a larger synthetic corpus (FLORES lines and the
shared text corpora shuffled into plain-text shards under a scratch folder). For each: the continued-training
words (`words` statistic, byte-level GPT-2 by default) in process, on 1 worker and on 2 workers, with the same
tasks and buckets; the counts must be identical (a fingerprint of every (word, count) item: no round holds two
results) and so must the merges learned from them.

Figures (targets from issues 14 and 22):

* each stage (map, reduce, finalize) in process and on the local executor, and the local executor's wall time
  against the in-process one: 1 worker ≤ 1.2×, 2 workers < 1.0× (issue 22), also with ``--hog`` (a busy process
  on one core for the whole run);

* counting-stage speed-up 1 → 2 workers (the map stage), target ≥ 1.7×;
* end-to-end speed-up 1 → 2 workers (plan + map + reduce + merge of the buckets + learning N merges), ≥ 1.3×
  on an idle machine;
* executor start-up: a LocalPipelineExecutor with 2 workers running 2 empty tasks, target ≤ 0.5 s;
* peak memory of the reduce: Python allocations (tracemalloc) of reducing the largest bucket vs summing every
  bucket (what one process would hold), and the keys per bucket;
* a projection for 100 GB on 64 workers from the measured per-worker map rate, reduce rate and merge time.

Usage: python bench/bench_corpus.py [--tokenizer DIR] [--synthetic-mb 120] [--tasks 8] [--buckets 8] [--n 1000]
       [--rounds 3] [--hog]

Each corpus runs in ``--rounds`` interleaved rounds (in process, 1 worker, 2 workers; fresh workdirs every round)
after a one-file warm-up job, so that neither path pays the per-process set-up the other reuses; the ratios are
per round and their medians (this machine's speed moves by 20 % within minutes).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.bpe.training import TrainingWords  # noqa: E402
from analysis.jobs import ExecutorConfig, compute, train_from_words  # noqa: E402
from analysis.jobs.executors import _local_class, _quiet_logger  # noqa: E402
from analysis.jobs.job import Workdir, read_counts, reduce_bucket  # noqa: E402

ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets"))


def load_avg() -> str:
    """The 1/5/15-minute load averages and the core count."""
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"


def synthetic_corpus(folder: Path, mb: int, shards: int, seed: int = 0) -> list[Path]:
    """Plain-text shards of about `mb` MB: FLORES devtest lines and the shared text corpora, shuffled."""

    lines: list[str] = []
    for p in sorted((ASSETS / "flores200" / "devtest").glob("*.devtest")):
        lines += [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
    for p in sorted((ASSETS / "corpora" / "text").glob("*.txt.gz")):
        if "hunspell" in p.name or "wordfreq" in p.name:
            continue
        lines += [ln for ln in gzip.decompress(p.read_bytes()).decode("utf-8").splitlines() if ln.strip()]
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    target = mb * 1_000_000
    per = target // shards
    out = []
    for i in range(shards):
        buf, size = [], 0
        while size < per:
            ln = lines[rng.randrange(len(lines))]
            buf.append(ln)
            size += len(ln.encode("utf-8")) + 1
        p = folder / f"shard-{i:03d}.txt"
        p.write_text("\n".join(buf) + "\n", encoding="utf-8")
        out.append(p)
    return out


def startup_seconds(scratch: Path, repeat: int = 5) -> float:
    """Median wall time of a local executor with 2 workers running 2 empty tasks (pool + manager + markers)."""
    cls = _local_class()
    times = []
    for i in range(repeat):
        d = scratch / f"noop-{i}"
        ex = cls([_noop], tasks=2, workers=2, logging_dir=str(d), start_method="fork")
        with _quiet_logger(True):
            t0 = time.perf_counter()
            ex.run()
            times.append(time.perf_counter() - t0)
        shutil.rmtree(d, ignore_errors=True)
    return statistics.median(times)


def _noop(data, rank, world_size):
    return None


def reduce_memory(wd: Workdir) -> dict:
    """tracemalloc peaks: reducing the largest bucket vs holding every reduced bucket at once."""
    m = wd.manifest()
    sizes = {
        b: sum(f.stat().st_size for f in (wd.root / "parts" / f"b{b:04d}").glob("*.npz"))
        for b in range(m.buckets)
    }
    big = max(sizes, key=sizes.get)
    wd.tokenizer()
    gc.collect()
    tracemalloc.start()
    meta = reduce_bucket(wd, big)
    _, peak_bucket = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.collect()
    tracemalloc.start()
    total: Counter = Counter()
    for b in range(m.buckets):
        read_counts(wd.reduced(b), total)
    _, peak_all = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "buckets": m.buckets,
        "largest_bucket_keys": meta["keys_in"],
        "all_keys": len(total),
        "peak_bucket_mb": peak_bucket / 2**20,
        "peak_all_mb": peak_all / 2**20,
    }


def warm_up(tok, files: list[Path]) -> None:
    """One small in-process job first, so that neither path pays the per-process set-up the other then reuses (the
    pre-tokenizer's piece rules and their check, the letter class, the segmenter)."""
    compute(tok, "words", [str(files[0])], executor=ExecutorConfig(kind="inprocess"))


def fingerprint(words: TrainingWords) -> tuple[int, int, int, int]:
    """(word types, units, characters, the sum of every (word, count) item's hash mod 2**64): equal counts give
    equal fingerprints, different ones differ but with probability 2**-64; lets a round compare an executor's
    counts with the in-process ones without holding both (the suite compares them in full)."""
    return len(words.words), words.units, words.chars, sum(map(hash, words.words.items())) % 2**64


def run_corpus(label: str, tok, files: list[Path], args, scratch: Path) -> dict:
    """In process, 1 worker, 2 workers on one corpus in `args.rounds` interleaved rounds (fresh workdirs each):
    stage timings, per-round ratios and their medians, identity checks, projection inputs."""
    inputs = [str(p) for p in files]
    size = sum(p.stat().st_size for p in files)
    print(f"\n== {label}: {len(files)} files, {size / 1e6:,.1f} MB ({load_avg()}); {args.rounds} round(s), each: "
          "in process, then 1 and 2 local workers")  # fmt: skip
    by_w: dict[int, list[float]] = {}
    warm_up(tok, files)
    rounds: list[dict] = []
    merges_ref: list | None = None
    first: dict = {}
    for k in range(args.rounds):
        gc.collect()
        t0 = time.perf_counter()
        ref = compute(tok, "words", inputs, executor=ExecutorConfig(kind="inprocess"))
        rd: dict = {"in": time.perf_counter() - t0, "in_stages": dict(ref.seconds)}
        si = ref.seconds
        print(f"[{k + 1}] in process: map {si['map']:.2f} s, reduce {si['reduce']:.2f} s, finalize "
              f"{si['finalize']:.2f} s; count {rd['in']:.2f} s ({size / 1e6 / rd['in']:.2f} MB/s), "
              f"{len(ref.result.words):,} word types")  # fmt: skip
        if merges_ref is None:
            t0 = time.perf_counter()
            merges_ref = train_from_words(tok, ref.result, args.n).merges()
            first["train"] = time.perf_counter() - t0
            first["word_types"] = len(ref.result.words)
            print(f"    learning {args.n} merges from the in-process counts: {first['train']:.2f} s")
        expected = fingerprint(ref.result)
        del ref  # not held while the executors run (a fresh run's heap holds no earlier result)
        for w in (1, 2):
            workdir = scratch / f"{label}-w{w}"
            shutil.rmtree(workdir, ignore_errors=True)  # a fresh workdir every round
            cfg = ExecutorConfig(
                kind="local", workers=w, tasks=args.tasks, buckets=args.buckets, workdir=str(workdir)
            )
            gc.collect()
            t0 = time.perf_counter()
            r = compute(tok, "words", inputs, executor=cfg)
            t_stat = time.perf_counter() - t0
            same = fingerprint(r.result) == expected
            metas = [json.loads(Workdir(r.workdir).totals(t).with_suffix(".meta.json").read_text())
                     for t in range(args.tasks)]  # fmt: skip
            cpu, task_wall = sum(x["cpu_seconds"] for x in metas), sum(x["seconds"] for x in metas)
            emit = sum(x.get("emit_seconds", 0.0) for x in metas)
            reduced = [json.loads(Workdir(r.workdir).reduced(b).with_suffix(".meta.json").read_text())
                       for b in range(args.buckets)]  # fmt: skip
            parts = {x: sum(m.get(f"{x}_seconds", 0.0) for m in reduced) for x in ("read", "reduce", "write")}
            rd[w] = {"stat": t_stat, "same": same, "stages": dict(r.seconds), "map_cpu": cpu}
            note = ""
            if k == 0:  # the merges (learning takes about as long as counting): once per executor
                t0 = time.perf_counter()
                first[w] = {"merges_same": train_from_words(tok, r.result, args.n).merges() == merges_ref,
                            "train": time.perf_counter() - t0}  # fmt: skip
                note = f", merges identical: {first[w]['merges_same']} (learning {first[w]['train']:.2f} s)"
            s = r.seconds
            print(f"    local, {w} worker(s), {args.tasks} tasks, {args.buckets} buckets: map {s['map']:.2f} s, reduce "
                  f"{s['reduce']:.2f} s, finalize {s['finalize']:.2f} s, statistic {t_stat:.2f} s "
                  f"({t_stat / rd['in']:.2f}× in process); counts identical: {same}{note}; map tasks "
                  f"{cpu:.2f} CPU s in {task_wall:.2f} task-wall s, of which splitting and writing buckets "
                  f"{emit:.2f} s; reduce tasks: reading parts {parts['read']:.2f} s, the statistic's reduce "
                  f"{parts['reduce']:.2f} s, writing {parts['write']:.2f} s")  # fmt: skip
            del r
        rounds.append(rd)

    def med(f) -> float:
        return statistics.median(f(rd) for rd in rounds)

    t_in = med(lambda rd: rd["in"])
    stages_in = {st: med(lambda rd, st=st: rd["in_stages"][st]) for st in ("map", "reduce", "finalize")}
    print(f"medians of {len(rounds)} round(s): in process map {stages_in['map']:.2f} s, reduce "
          f"{stages_in['reduce']:.2f} s, finalize {stages_in['finalize']:.2f} s, count {t_in:.2f} s")  # fmt: skip
    for w in (1, 2):
        target = "≤ 1.2×" if w == 1 else "< 1.0×"
        ratios = [rd[w]["stat"] / rd["in"] for rd in rounds]
        by_w[w] = ratios
        st = {x: med(lambda rd, x=x, w=w: rd[w]["stages"][x]) for x in ("map", "reduce", "finalize")}
        print(f"local {w} worker(s) / in process, statistic wall time: {statistics.median(ratios):.2f}× (target "
              f"{target}; rounds: {', '.join(f'{x:.2f}×' for x in ratios)}); map {st['map'] / stages_in['map']:.2f}×, "
              f"reduce {st['reduce'] / stages_in['reduce']:.2f}×, finalize {st['finalize']:.2f} s vs "
              f"{stages_in['finalize']:.2f} s")  # fmt: skip
    map_1w = med(lambda rd: rd[1]["stages"]["map"])
    map_speedup = med(lambda rd: rd[1]["stages"]["map"] / rd[2]["stages"]["map"])
    stat_1w, stat_2w = med(lambda rd: rd[1]["stat"]), med(lambda rd: rd[2]["stat"])
    e2e_1, e2e_2 = stat_1w + first[1]["train"], stat_2w + first[2]["train"]
    print(f"counting-stage speed-up 1→2 workers: {map_speedup:.2f}× (target ≥ 1.7×); map CPU seconds 1 vs 2 "
          f"workers {rounds[0][1]['map_cpu']:.1f} vs {rounds[0][2]['map_cpu']:.1f} (the work itself does not grow)")  # fmt: skip
    print(f"end-to-end speed-up 1→2 workers: {e2e_1 / e2e_2:.2f}× (target ≥ 1.3×); statistic only "
          f"{stat_1w / stat_2w:.2f}×")  # fmt: skip
    print(f"2 workers vs in process (count + merges): {(t_in + first['train']) / e2e_2:.2f}×")
    wd2 = Workdir(scratch / f"{label}-w2")  # the last round's
    parts_bytes = sum(f.stat().st_size for f in (wd2.root / "parts").rglob("t*-p*.npz"))
    return {
        "bytes": size,
        "map_rate_1w": size / map_1w,
        "map_cpu_1w": rounds[0][1]["map_cpu"],
        "files": len(files),
        "reduce_s_1w": med(lambda rd: rd[1]["stages"]["reduce"]),
        "parts_bytes": parts_bytes,
        "finalize_s": med(lambda rd: rd[2]["stages"]["finalize"]),
        "train_s": first["train"],
        "word_types": first["word_types"],
        "identical": all(rd[w]["same"] for rd in rounds for w in (1, 2))
        and all(first[w]["merges_same"] for w in (1, 2)),
        "map_speedup": map_speedup,
        "e2e_speedup": e2e_1 / e2e_2,
        "wd2": wd2,
        "per_shard_s": map_1w / len(files),
        "in_process_s": t_in,
        "ratio_1_worker": statistics.median(by_w[1]),
        "rounds_1_worker": [round(x, 3) for x in by_w[1]],
        "ratio_2_workers": statistics.median(by_w[2]),
        "rounds_2_workers": [round(x, 3) for x in by_w[2]],
    }


def main() -> int:
    """Run the benchmark and print figures, ratios vs targets and the projection."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(ASSETS / "tokenizers" / "gpt2"))
    ap.add_argument("--flores-files", type=int, default=0, help="only the first N FLORES files (0: all 204)")
    ap.add_argument("--synthetic-mb", type=int, default=120, help="size of the larger corpus (0: skip it)")
    ap.add_argument("--synthetic-shards", type=int, default=24)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--n", type=int, default=1000, help="merges learned from the counts")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per corpus (medians reported)")
    ap.add_argument(
        "--scratch", default=None, help="folder for workdirs and the synthetic corpus (removed after)"
    )
    ap.add_argument(
        "--hog", action="store_true", help="keep one core busy with another process for the whole run"
    )
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.hog else None
    tok = load(args.tokenizer)
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="bench-corpus-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"tokenizer {tok.name}; {load_avg()}" + ("; a CPU hog on one core" if hog else ""))
    try:
        st = startup_seconds(scratch)
        print(f"executor start-up (2 workers, 2 empty tasks, median of 5): {st:.3f} s (target ≤ 0.5 s)")
        flores = sorted((ASSETS / "flores200" / "devtest").glob("*.devtest"))[: args.flores_files or None]
        results = {"FLORES-200 devtest": run_corpus("flores", tok, flores, args, scratch)}
        if args.synthetic_mb:
            t0 = time.perf_counter()
            files = synthetic_corpus(scratch / "synthetic", args.synthetic_mb, args.synthetic_shards)
            print(f"\n(synthetic corpus written in {time.perf_counter() - t0:.1f} s)")
            results["synthetic"] = run_corpus("synthetic", tok, files, args, scratch)
        big = results[list(results)[-1]]
        mem = reduce_memory(big["wd2"])
        print(f"\nreduce memory ({mem['buckets']} buckets): largest bucket {mem['largest_bucket_keys']:,} of "
              f"{mem['all_keys']:,} keys; peak {mem['peak_bucket_mb']:.1f} MB reducing it vs {mem['peak_all_mb']:.1f} MB "
              f"holding every bucket ({mem['peak_bucket_mb'] / mem['peak_all_mb']:.2f}×; 1/K = {1 / mem['buckets']:.2f})")  # fmt: skip
        print(
            "\nidentical counts and merges on every executor:", all(r["identical"] for r in results.values())
        )
        # projection: 100 GB on 64 workers
        gb, workers = 100e9, 64
        shard_mb = big["bytes"] / 1e6 / big["files"]
        cpu_rate = big["bytes"] / big["map_cpu_1w"]  # bytes per CPU second of one map worker
        wall_rate = big["map_rate_1w"]
        eff = min(1.0, big["map_speedup"] / 2)
        t_free = gb / (cpu_rate * workers)
        t_load = gb / (wall_rate * workers * eff)
        parts_per_byte = big["parts_bytes"] / big["bytes"]
        t_reduce = gb * parts_per_byte / (big["parts_bytes"] / big["reduce_s_1w"] * workers)
        print(f"\nprojection, 100 GB on {workers} workers (from the {list(results)[-1]} run, {shard_mb:.1f} MB shards, "
              f"{big['per_shard_s']:.2f} s each on one worker): map {cpu_rate / 1e6:.2f} MB per CPU second → "
              f"{t_free / 60:,.0f} min on {workers} free cores ({t_load / 60:,.0f} min at this run's "
              f"{wall_rate / 1e6:.2f} MB/s per worker and 2-worker efficiency {eff:.2f}); reduce ≤ {t_reduce / 60:,.0f} min "
              f"(partial counts {parts_per_byte:.2f} B per input byte at this size, an upper bound: distinct words "
              f"grow sublinearly); on one machine, merging the buckets + {args.n} merges: "
              f"{big['finalize_s'] + big['train_s']:.0f} s at {big['word_types']:,} word types (grows with word types, "
              "not bytes)")  # fmt: skip
        print(f"\n{load_avg()}")
        keep = (
            "files",
            "bytes",
            "in_process_s",
            "ratio_1_worker",
            "rounds_1_worker",
            "ratio_2_workers",
            "rounds_2_workers",
            "map_speedup",
            "e2e_speedup",
            "word_types",
            "identical",
        )
        figures = {"startup_s": round(st, 3), "hog": args.hog, "rounds": args.rounds,
                   "corpora": {name: {k: (round(r[k], 3) if isinstance(r[k], float) else r[k]) for k in keep}
                               for name, r in results.items()}}  # fmt: skip
        fl = results["FLORES-200 devtest"]
        run.write(figures, targets={"ratio_1_worker": "<= 1.2", "ratio_2_workers": "< 1.0", "startup_s": "<= 0.5",
                                    "map_speedup": ">= 1.7 (idle)", "identical": True},
                  met=fl["ratio_1_worker"] <= 1.2 and fl["ratio_2_workers"] < 1.0 and st <= 0.5
                  and all(r["identical"] for r in results.values()))  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if hog is not None:
            hog.kill()
            hog.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
