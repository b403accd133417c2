"""Benchmark: the model check on a GPU — a 1–2B model on all 204 FLORES languages, and warm-ups of 1,000 steps.

Needs a CUDA machine for its targets (prints a note and exits 0 without one, unless `--device cpu` asks for a
small dry run). In one run, with a randomly initialised Llama of about `--params` parameters (default 1.5e9)
and a real tokenizer (`--tokenizer`, default Llama-3.1 from the shared assets, 128,256 ids) — a stand-in for a
big model that needs no download — saved as bf16 safetensors in a temporary folder:

0. the extension: ``python -m analysis extend --model ORIGINAL --flores est_Latn --n N --init fvt --out EDITED``
   (the CLI itself, timed; the edited model gets N Estonian tokens with FVT rows);
1. the engine's bits-per-byte pass vs a plain batched transformers loop over the same token batches on the GPU
   (``bench_model_check.plain_loop``), best of `--repeat`, and that both give the same bits. Target ≤ 1.2×;
2. the whole check (bits per byte, mass on new ids, KL on unchanged spans, new tokens' use) of the original and
   the edited model on every FLORES language × 212 held-out lines (`--lines`). Target ≤ 180 s;
3. warm-ups of the new rows only, `--steps` steps of 1,024 tokens of est_Latn training lines, for each
   objective in `--objectives` (ntp, distill), with bits per byte on est_Latn and eng_Latn held-out lines at the
   start and the end. Target ≤ 300 s for 1,000 steps. Each part stops at its cap (`--cap-languages`,
   `--cap-warmup`: the figures then say how far it got), and a warm-up that would not finish before `--deadline`
   seconds since the start is skipped and says so;
4. with `--diagnose`, where part 2's time goes: the original model's forward passes alone over the same
   languages' lines (the check's one forward loop, :func:`analysis.model.bpb.iter_scored`, nothing else; each
   language's segments batched by length as :func:`analysis.model.bpb.bits_per_byte` does, so the batches are
   not the check's, which batches within groups of consecutive lines), then the same check a second time in the
   same process (its batch shapes, kernels and the allocator's blocks already seen once). On an H200
   (2026-12-04, 17 languages, each setting in a fresh process): with PyTorch's own choice of attention kernels
   (``--sdpa any``) the first check took 20.9 s, the forward passes alone 5.6 s and the check again 7.6 s; with
   the engine's default (no cuDNN attention) 8.6, 2.7 and 7.0 s.
   `--sdpa` sets the attention kernels for the whole run, the engine's forward passes
   (:data:`analysis.model.bpb.CUDA_SDPA`) and the plain loop alike: e.g. ``efficient,math``, or ``any`` for
   PyTorch's own choice (cuDNN's attention included, which builds a graph for every new batch shape); without it
   the engine's default (every kernel but cuDNN's) and PyTorch's choice for the plain loop.

`--keep DIR` builds and extends the two models in DIR once and reuses them when they are there (several runs
with different settings over the same models, each in a fresh process).

    python bench/bench_model_check_gpu.py [--params 1.5e9] [--n 1000] [--steps 1000] [--objectives ntp,distill]
                                          [--langs all] [--lines 212] [--json-out FILE] [--deadline 540]
                                          [--diagnose] [--sdpa efficient,math|any] [--keep DIR]

The summary (one JSON document) is printed at the end and written to `--json-out` after every part, so that a
run stopped at its time limit still leaves what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from _results import Run, variant_from  # noqa: E402
from bench_model_check import plain_loop  # noqa: E402
from bench_verify import build_model  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from analysis.adapt.warmup import WarmupConfig, warm_up  # noqa: E402
from analysis.core.outputs import atomic_write_text, json_document  # noqa: E402
from analysis.core.paths import shared_assets  # noqa: E402
from analysis.evaluate.model_check import (  # noqa: E402
    Loaded,
    heldout_texts,
    load_pair,
    model_check,
    training_texts,
)
from analysis.model import bpb  # noqa: E402
from analysis.model.bpb import (  # noqa: E402
    batch_tokens_for,
    bits_per_byte,
    encode_lines,
    iter_scored,
    prefix_token,
    segments,
)
from analysis.texts.flores import available_codes  # noqa: E402

#: --sdpa names → the attention kernels PyTorch may pick
SDPA_BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def main() -> int:
    """Run the parts and print (and write) one JSON summary."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", type=float, default=1.5e9)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--inter", type=int, default=5632)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--tokenizer", default=str(shared_assets() / "tokenizers" / "llama-3.1"))
    ap.add_argument("--n", type=int, default=1000, help="new Estonian tokens of the extension")
    ap.add_argument("--langs", default="all", help="part 2: FLORES codes, comma-separated, or all")
    ap.add_argument("--lines", type=int, default=212, help="part 2: held-out lines per language")
    ap.add_argument("--bpb-lines", type=int, default=212, help="part 1: est_Latn held-out lines")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--objectives", default="ntp,distill")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds since the start")
    ap.add_argument("--cap-languages", type=float, default=240.0, help="part 2 stops after this many seconds")
    ap.add_argument("--cap-warmup", type=float, default=330.0, help="a warm-up stops after this many seconds")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--diagnose", action="store_true", help="part 4: forward alone, and part 2 a second time")
    ap.add_argument(
        "--sdpa",
        default="",
        help="attention kernels allowed: math,flash,efficient,cudnn, or any "
        "(default: the engine's CUDA_SDPA for its passes, any for the plain loop)",
    )
    ap.add_argument("--keep", default=None, help="build and extend the models here once; reuse them after")
    args = ap.parse_args()
    names = [x.strip() for x in args.sdpa.split(",") if x.strip()]
    unknown = [x for x in names if x not in [*SDPA_BACKENDS, "any"]]
    if unknown:
        ap.error(f"--sdpa: unknown kernel {unknown[0]!r}; choose from {', '.join(SDPA_BACKENDS)}, or any")
    if "any" in names and len(names) > 1:
        ap.error("--sdpa: any stands alone (PyTorch's own choice of every kernel)")

    start = time.perf_counter()
    run = Run(__file__, variant=variant_from(ap, args))
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_model_check_gpu: no CUDA device here; nothing to measure")
        return 0
    on_gpu = args.device.startswith("cuda")
    summary: dict = {"device": torch.cuda.get_device_name(0) if on_gpu else "cpu"}

    def save(part: str | None = None) -> None:
        """Print `part`'s figures (or, without one, the whole summary) and write the summary to `--json-out`."""
        summary["elapsed_s"] = round(time.perf_counter() - start, 1)
        if part is None:
            print(json_document(summary), end="")
        else:
            print(
                f"[{summary['elapsed_s']:.0f} s] {part}: {json.dumps(summary.get(part), default=str)}",
                flush=True,
            )
        if args.json_out:
            atomic_write_text(args.json_out, json_document(summary))
        run.write(summary, targets={"bpb_pass.ratio": "<= 1.2", "all_languages.seconds": "<= 180",
                                    "warmup.seconds": "<= 300"})  # fmt: skip

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    kernels = contextlib.ExitStack()
    if "any" in names:
        bpb.CUDA_SDPA = None
    elif names:
        bpb.CUDA_SDPA = tuple(SDPA_BACKENDS[x].name for x in names)
        kernels.enter_context(sdpa_kernel([SDPA_BACKENDS[x] for x in names]))
    summary["sdpa"] = {"option": args.sdpa or None, "engine": bpb.CUDA_SDPA}
    kept = Path(args.keep) if args.keep else None
    tmp = kept or Path(tempfile.mkdtemp(prefix="bench-model-check-gpu-"))
    try:
        if kept and (kept / "edited" / "config.json").is_file():
            summary["model"] = {"reused": str(kept)}
        else:
            build_pair(args, tmp, summary, save)

        t = time.perf_counter()
        original, edited = load_pair(tmp / "original", tmp / "edited", device=args.device)
        sync()
        summary["load_s"] = round(time.perf_counter() - t, 1)

        # 1. the engine's pass vs a plain transformers loop, same batches
        lines = heldout_texts(["est_Latn"], args.bpb_lines)["est_Latn"]
        budget = batch_tokens_for(original.model)
        seqs = encode_lines(original.tok, lines, prefix_token(original.tok, original.model.config))
        plain_loop(original.model, seqs[:8], budget)  # warm-up of both paths (kernels, allocator)
        bits_per_byte(original.model, original.tok, lines[:8], device=original.device, batch_tokens=budget)
        t_ref = t_ours = float("inf")
        bits_ref = got = None
        for _ in range(args.repeat):  # interleaved, best of each
            sync()
            t = time.perf_counter()
            bits_ref = plain_loop(original.model, seqs, budget)
            sync()
            t_ref = min(t_ref, time.perf_counter() - t)
            t = time.perf_counter()
            got = bits_per_byte(original.model, original.tok, lines, device=original.device, batch_tokens=budget,
                                window=10**9, stride=1)  # fmt: skip
            sync()
            t_ours = min(t_ours, time.perf_counter() - t)
        summary["bpb_pass"] = {
            "lines": len(lines),
            "tokens": got.tokens,
            "batch_tokens": budget,
            "engine_s": round(t_ours, 3),
            "plain_loop_s": round(t_ref, 3),
            "ratio": round(t_ours / t_ref, 3),
            "target_ratio": 1.2,
            "bits_engine": got.bits,
            "bits_plain": bits_ref,
            "tokens_per_s_plain": round(got.tokens / t_ref),
        }
        save("bpb_pass")

        # 2. every language
        langs = available_codes() if args.langs == "all" else [x for x in args.langs.split(",") if x]
        texts = heldout_texts(langs, args.lines)
        sync()
        t = time.perf_counter()
        stop_at = t + args.cap_languages
        res = model_check(original, edited, texts, should_stop=lambda: time.perf_counter() > stop_at)
        sync()
        took = time.perf_counter() - t
        doc = res.to_json()
        per = doc["languages"]
        summary["all_languages"] = {
            "complete": res.complete,
            "languages": len(per),
            "lines_per_language": args.lines,
            "seconds": round(took, 1),
            "with_load_s": round(took + summary["load_s"], 1),
            "target_s": 180,
            "tokens_original": sum(c["tokens_original"] for c in per),
            "tokens_edited": sum(c["tokens_edited"] for c in per),
            "est_Latn": next((c for c in per if c["lang"] == "est_Latn"), None),
            "eng_Latn": next((c for c in per if c["lang"] == "eng_Latn"), None),
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if on_gpu else None,
        }
        save("all_languages")
        if args.diagnose:
            summary["diagnose"] = diagnose(original, edited, texts, sync)
            save("diagnose")

        # 3. warm-ups
        train = training_texts(["est_Latn"])
        held = heldout_texts(["est_Latn", "eng_Latn"])
        summary["warmup"] = {}
        for objective in [x for x in args.objectives.split(",") if x]:
            left = args.deadline - (time.perf_counter() - start)
            if left < 30:
                summary["warmup"][objective] = {"skipped": f"{left:.0f} s left before the deadline"}
                save("warmup")
                continue
            cfg = WarmupConfig(
                steps=args.steps, objective=objective, tokens_per_step=1024, eval_every=args.steps
            )
            sync()
            t = time.perf_counter()
            stop_at = t + min(args.cap_warmup, left)
            w = warm_up(
                original, edited, train, held, cfg, should_stop=lambda at=stop_at: time.perf_counter() > at
            )
            sync()
            took = time.perf_counter() - t
            summary["warmup"][objective] = {
                "complete": w.complete,
                "steps": w.steps_done,
                "seconds": round(took, 1),
                "per_step_s": round(took / max(1, w.steps_done), 4),
                "target_s": 300,
                "curve": w.curve,
                "loss_first": w.losses[0] if w.losses else None,
                "loss_last": w.losses[-1] if w.losses else None,
            }
            del w
            if on_gpu:
                torch.cuda.empty_cache()
            save("warmup")
    finally:
        kernels.close()
        if kept is None:
            shutil.rmtree(tmp, ignore_errors=True)
    save()
    return 0


def build_pair(args: argparse.Namespace, tmp: Path, summary: dict, save: Callable[[str], None]) -> None:
    """Build the random model in ``tmp/original`` and extend it through the CLI into ``tmp/edited`` (parts 0)."""
    t = time.perf_counter()
    summary["model"] = build_model(args.params, Path(args.tokenizer), tmp / "original", hidden=args.hidden,
                                   inter=args.inter, heads=args.heads, device=args.device)  # fmt: skip
    summary["model"]["build_s"] = round(time.perf_counter() - t, 1)
    save("model")

    # 0. the extension, through the CLI
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "analysis", "extend", "--model", str(tmp / "original"), "--flores", "est_Latn",
           "--n", str(args.n), "--init", "fvt", "--out", str(tmp / "edited"), "--quiet", "--json"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-4000:], sep="\n")
        raise SystemExit(f"extend failed with exit {done.returncode}")
    rep = json.loads(done.stdout)
    model_rep = {k: v for k, v in (rep.get("model") or {}).items() if k != "pieces_sample"}
    summary["extend"] = {"seconds": round(time.perf_counter() - t, 1), "new_tokens": rep.get("added"),
                         "model": model_rep}  # fmt: skip
    save("extend")


def diagnose(original: Loaded, edited: Loaded, texts: dict[str, list[str]], sync: Callable[[], None]) -> dict:
    """Part 4: the original model's forward loop alone over every language's segments (as the check cuts and
    batches them per language), then the whole check again; seconds of each."""
    prefix = prefix_token(original.tok, original.model.config)
    budget = batch_tokens_for(original.model)
    sync()
    t = time.perf_counter()
    n = 0
    for lines in texts.values():
        segs = segments(encode_lines(original.tok, lines, prefix))
        for _ in iter_scored(original.model, segs, device=original.device, batch_tokens=budget, hidden=True):
            n += 1
    sync()
    forward = time.perf_counter() - t
    t = time.perf_counter()
    model_check(original, edited, texts)
    sync()
    return {
        "segments": n,
        "forward_only_s": round(forward, 1),
        "check_again_s": round(time.perf_counter() - t, 1),
    }


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    raise SystemExit(main())
