"""Benchmark: under-trained tokens on a GPU — indicators on CUDA vs CPU, verification on one GPU vs spread.

Needs a CUDA machine (prints a note and exits 0 without one). In one run:

1. builds a randomly initialised Llama of about `--params` parameters (default 1.5e9) with a real tokenizer
   (`--tokenizer`, default Llama-3.1 from the shared assets), saved as bf16 safetensors in a temporary folder —
   a stand-in for a big model that needs no download;
2. indicators (cosine / L2 distance to the reference mean) on the CPU (baseline) and on CUDA: same values
   (max |difference|), and the speed-up;
3. verification of `--k` candidates with the model on one GPU, then with ``device_map="auto"`` and a
   ``max_memory`` cap that puts only part of the layers on the GPU and the rest in CPU memory (what a model
   larger than one device gets): per-candidate cost of each, and that both give the same verdicts.

    python bench/bench_verify.py [--params 1.5e9] [--k 64] [--batch-size 16] [--gpu-share 0.5]
    python bench/bench_verify.py --model PATH_OR_GGUF [--tokenizer T]    # a real model instead (e.g. SmolLM2)

Targets: indicators on CUDA no slower than on the CPU; spread verification gives the same verdicts as the single
GPU; per-candidate cost reported (no fixed target: it depends on the model and the interconnect).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.core.paths import shared_assets  # noqa: E402
from analysis.methods.undertrained import analyze, verify_result  # noqa: E402


def build_model(
    params: float,
    tokenizer_dir: Path,
    out: Path,
    *,
    hidden: int = 2048,
    inter: int = 5632,
    heads: int = 16,
    device: str = "cuda",
) -> dict:
    """A random Llama with roughly `params` parameters and the tokenizer's vocabulary, built on `device` and saved
    to `out` as bf16 safetensors with the tokenizer's files."""
    import torch  # noqa: PLC0415 - heavy, only when the bench runs
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    tok = load(tokenizer_dir)
    vocab = tok.vocab_size
    per_layer = 4 * hidden * hidden + 3 * hidden * inter
    layers = max(1, int(round((params - 2 * vocab * hidden) / per_layer)))
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out, safe_serialization=True)
    for f in tokenizer_dir.iterdir():
        if f.name.startswith("tokenizer"):
            shutil.copy(f, out / f.name)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"params": n, "layers": layers, "vocab": vocab, "hidden": hidden}


def main() -> int:
    """Run the benchmark and print one JSON summary."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", type=float, default=1.5e9)
    ap.add_argument("--tokenizer", default=str(shared_assets() / "tokenizers" / "llama-3.1"))
    ap.add_argument("--model", default=None, help="a real model instead of the random one")
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--gpu-share", type=float, default=0.5, help="share of the model the GPU cap admits")
    ap.add_argument("--out", default=None, help="write the JSON summary here too")
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    import torch  # noqa: PLC0415 - heavy, only when the bench runs

    if not torch.cuda.is_available():
        print("bench_verify: no CUDA device here; nothing to measure")
        return 0
    summary: dict = {"device": torch.cuda.get_device_name(0)}
    tmp = Path(tempfile.mkdtemp(prefix="bench-verify-"))
    try:
        if args.model:
            model = args.model
            tok = load(args.tokenizer) if args.tokenizer else None
        else:
            t0 = time.perf_counter()
            summary["model"] = build_model(args.params, Path(args.tokenizer), tmp / "model")
            summary["build_s"] = round(time.perf_counter() - t0, 1)
            model = str(tmp / "model")
            tok = load(model)
        # 2. indicators: CPU baseline vs CUDA
        t0 = time.perf_counter()
        cpu = analyze(model, tok)
        t_cpu = cpu.timings["indicators"]
        gpu = analyze(model, tok, device="cuda")
        t_gpu = gpu.timings["indicators"]
        diff = max(float(np.max(np.abs(cpu.indicators[k] - gpu.indicators[k]))) for k in cpu.indicators)
        summary["indicators"] = {
            "rows": cpu.n_rows,
            "cpu_s": round(t_cpu, 3),
            "cuda_s": round(t_gpu, 3),
            "speedup": round(t_cpu / max(t_gpu, 1e-9), 2),
            "max_abs_diff": diff,
            "same_candidates": cpu.candidates[:200] == gpu.candidates[:200],
        }
        # 3. verification: one GPU vs a GPU + CPU split
        k = min(args.k, len(gpu.candidates))
        verify_result(gpu, model, tok, k, device="cuda", batch_size=args.batch_size)
        one = gpu
        need = one.placement["needed_bytes"]
        cap = max(1, int(need / 1.2 * args.gpu_share))
        split = analyze(model, tok, device="cuda")
        verify_result(
            split,
            model,
            tok,
            k,
            device="cuda",
            max_memory={0: f"{cap // (1 << 20)}MiB", "cpu": "100GiB"},
            batch_size=args.batch_size,
        )
        same = sum(
            one.verifications[i].verdict == split.verifications[i].verdict
            for i in one.verifications
            if i in split.verifications
        )
        summary["verification"] = {
            "k": k,
            "batch_size": args.batch_size,
            "one_gpu": {
                "placement": one.placement,
                "load_s": round(one.timings["load_lm"], 2),
                "per_candidate_s": round(one.timings.get("verify_per_candidate", float("nan")), 4),
            },
            "spread": {
                "placement": split.placement,
                "load_s": round(split.timings["load_lm"], 2),
                "per_candidate_s": round(split.timings.get("verify_per_candidate", float("nan")), 4),
            },
            "same_verdicts": f"{same}/{k}",
            "verdicts": one.to_json()["verdict_counts"],
        }
        print(json.dumps(summary, indent=2))
        ind = summary["indicators"]
        print(
            f"indicators: CUDA {ind['cuda_s']} s vs CPU {ind['cpu_s']} s ({ind['speedup']}x; target >= 1x), "
            f"max |diff| {ind['max_abs_diff']:.2e}"
        )
        v = summary["verification"]
        print(
            f"verification per candidate: one GPU {v['one_gpu']['per_candidate_s']} s, spread "
            f"{v['spread']['per_candidate_s']} s ({v['spread']['placement'].get('device_map_summary')}); "
            f"same verdicts {v['same_verdicts']}"
        )
        if args.out:
            Path(args.out).write_text(json.dumps(summary, indent=2))
        run.write(summary, targets={"indicators.speedup": ">= 1 on big matrices", "verification.same_verdicts": "all"},
                  met=same == k)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
