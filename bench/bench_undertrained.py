"""Benchmark: under-trained token indicators for a 128k × 4096 float16 matrix stored in safetensors.

Targets (issue 7): indicators ≤ 10 s on CPU; peak memory ≤ 1.5× the matrix's bytes.
Baseline in the same run: the naive way (load the whole tensor with safetensors, convert to float32, compute
cosine and L2 distance on full matrices with torch). Each measurement runs in a fresh subprocess so its peak
RSS (VmHWM) is its own; tracemalloc peaks are printed too.

    python bench/bench_undertrained.py [--rows 131072] [--dim 4096] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import Run, variant_from

ROOT = Path(__file__).resolve().parents[1]
REFS = list(range(177, 188))


def write_matrix(path: Path, rows: int, dim: int) -> int:
    """Write a float16 [rows, dim] 'model.embed_tokens.weight' safetensors file block by block."""
    nbytes = rows * dim * 2
    header = {
        "model.embed_tokens.weight": {"dtype": "F16", "shape": [rows, dim], "data_offsets": [0, nbytes]}
    }
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    rng = np.random.default_rng(0)
    common = rng.standard_normal(dim).astype(np.float32)
    offset = rng.standard_normal(dim).astype(np.float32) * 0.03
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        step = 8192
        for s in range(0, rows, step):
            n = min(step, rows - s)
            b = rng.standard_normal((n, dim), dtype=np.float32) * 0.05
            b += np.outer(rng.uniform(0.5, 1.5, n), offset).astype(
                np.float32
            )  # real embeddings share an offset
            for r in REFS:  # "untrained" rows share a direction
                if s <= r < s + n:
                    b[r - s] = common * 0.02 + b[r - s] * 0.1
            f.write(b.astype(np.float16).tobytes())
    (path.parent / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "tie_word_embeddings": True})
    )
    return nbytes


CHILD = r"""
import json, sys, time, tracemalloc
sys.path.insert(0, sys.argv[3])
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return 0
mode, path = sys.argv[1], sys.argv[2]
import numpy as np
if mode == "ours":
    from analysis.methods.undertrained import compute_indicators, first_principal_component, row_norms
    from analysis.model.weights import load_embeddings
else:
    import torch
    from safetensors.torch import load_file
base = rss("VmRSS:")
try:
    open("/proc/self/clear_refs", "w").write("5")  # reset VmHWM to the current RSS
except OSError:
    pass
import resource
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
tracemalloc.start()
c0 = cpu()
t0 = time.perf_counter()
out = {}
if mode == "ours":
    w = load_embeddings(path)
    ind = compute_indicators(w, __REFS__)
    t1 = time.perf_counter()
    out["indicators_s"] = t1 - t0
    out["cpu_s"] = cpu() - c0
    out["names"] = list(ind)
    out["ref_cos"] = float(ind["cosine"][__REFS__].mean())
    out["median_cos"] = float(np.median(ind["cosine"]))
    _, peak = tracemalloc.get_traced_memory()
    out["peak_rss"] = rss("VmHWM:") - base
    out["tracemalloc_peak"] = peak
    t2 = time.perf_counter(); row_norms(w.input); out["input_norm_s"] = time.perf_counter() - t2
    t2 = time.perf_counter(); first_principal_component(w.input, max_iters=10); out["pc1_s"] = time.perf_counter() - t2
else:
    e = load_file(path)["model.embed_tokens.weight"].float()
    u = e[__REFS__].mean(0)
    cos = 1 - (e @ u) / torch.clamp(e.norm(dim=1) * u.norm(), min=1e-6)
    l2 = (e - u).norm(dim=1)
    out["indicators_s"] = time.perf_counter() - t0
    out["cpu_s"] = cpu() - c0
    out["ref_cos"] = float(cos[__REFS__].mean())
    _, peak = tracemalloc.get_traced_memory()
    out["peak_rss"] = rss("VmHWM:") - base
    out["tracemalloc_peak"] = peak
print(json.dumps(out))
""".replace("__REFS__", repr(REFS))


def run_child(mode: str, path: Path) -> dict:
    """Run one measurement in a fresh interpreter and return its JSON result."""
    r = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path), str(ROOT)], capture_output=True, text=True
    )
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    """Generate the matrix, measure ours and the naive baseline, print ratios against the targets."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=131072)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--keep", default=None, help="folder to write the matrix into (kept)")
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="toklab-bench-ut-")
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.safetensors"
    t0 = time.perf_counter()
    nbytes = args.rows * args.dim * 2
    if args.keep and path.is_file() and nbytes < path.stat().st_size < nbytes + 4096:
        print(f"reusing {path}")  # the matrix from an earlier run with --keep
    else:
        nbytes = write_matrix(path, args.rows, args.dim)
    print(
        f"matrix {args.rows} x {args.dim} float16 = {nbytes / 2**30:.2f} GiB written in "
        f"{time.perf_counter() - t0:.1f} s ({os.cpu_count()} CPUs)"
    )
    with open(path, "rb") as f:  # warm the page cache so both runs measure compute, not the first disk read
        while f.read(1 << 26):
            pass
    ours = run_child("ours", path)
    naive = run_child("naive", path)
    if "error" in ours:
        print("ours failed:", ours["error"])
        return 1
    print(
        f"ours : indicators {ours['names']} in {ours['indicators_s']:.2f} s (target <= 10 s: "
        f"{'OK' if ours['indicators_s'] <= 10 else 'MISSED'}; CPU time {ours['cpu_s']:.2f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs); peak RSS delta {ours['peak_rss'] / 2**20:.0f} MiB = "
        f"{ours['peak_rss'] / nbytes:.2f}x matrix (target <= 1.5x: {'OK' if ours['peak_rss'] <= 1.5 * nbytes else 'MISSED'}); "
        f"tracemalloc peak {ours['tracemalloc_peak'] / 2**20:.0f} MiB = {ours['tracemalloc_peak'] / nbytes:.2f}x"
    )
    print(
        f"       reference rows' mean cosine distance {ours['ref_cos']:.4f} vs median {ours['median_cos']:.4f}; "
        f"extra: input L2 norms {ours['input_norm_s']:.2f} s, first principal component {ours['pc1_s']:.2f} s"
    )
    if "error" in naive:
        print("naive baseline failed:", naive["error"])
    else:
        print(
            f"naive: full float32 torch in {naive['indicators_s']:.2f} s (CPU {naive['cpu_s']:.2f} s); peak RSS delta "
            f"{naive['peak_rss'] / 2**20:.0f} MiB = {naive['peak_rss'] / nbytes:.2f}x matrix"
        )
        print(
            f"ratio ours/naive: time {ours['indicators_s'] / naive['indicators_s']:.2f}x, "
            f"peak memory {ours['peak_rss'] / max(1, naive['peak_rss']):.2f}x; same reference cosine: "
            f"{abs(ours['ref_cos'] - naive['ref_cos']) < 1e-3}"
        )
    figures = {"rows": args.rows, "dim": args.dim, "matrix_gib": round(nbytes / 2**30, 3),
               "indicators_s": round(ours["indicators_s"], 3), "cpu_s": round(ours["cpu_s"], 3),
               "peak_rss_vs_matrix": round(ours["peak_rss"] / nbytes, 3),
               "tracemalloc_vs_matrix": round(ours["tracemalloc_peak"] / nbytes, 3)}  # fmt: skip
    if "error" not in naive:
        figures |= {"naive_s": round(naive["indicators_s"], 3),
                    "naive_peak_rss_vs_matrix": round(naive["peak_rss"] / nbytes, 3)}  # fmt: skip
    run.write(figures, targets={"indicators_s": "<= 10", "peak_rss_vs_matrix": "<= 1.5"},
              met=ours["indicators_s"] <= 10 and ours["peak_rss"] <= 1.5 * nbytes)  # fmt: skip
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
