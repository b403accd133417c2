"""`python -m analysis undertrained --model M [--tokenizer T] [--verify K] --json`: magikarp-style
under-trained token detection from the model's own embedding matrices (Land & Bartolo, "Fishing for
Magikarp", EMNLP 2024)."""

from __future__ import annotations

import argparse

from analysis.core.inputs import real_number, whole_number
from analysis.core.outputs import atomic_write_text
from analysis.core.progress import stderr_progress
from analysis.methods.undertrained import (
    INDICATOR_LABELS,
    analyze,
    health_table,
    ordinal,
    parse_reference_spec,
    stt_status,
    verify_result,
)
from analysis.model.models import parse_max_memory
from analysis.model.source import resolve_model, tokenizer_for_model
from analysis.tokenizer.sources import load

from ._common import print_json

NAME = "undertrained"
HELP = "find under-trained tokens from a model's embeddings (magikarp indicators + verification prompts)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `undertrained`."""
    p.add_argument("--model", required=True, help="model folder, .safetensors/.gguf/.bin file, or hub id")
    p.add_argument(
        "--tokenizer", default=None, help="tokenizer (folder, file or hub id); default: the model's own"
    )
    p.add_argument("--revision", default=None, help="hub revision")
    p.add_argument("--token", default=None, help="hub access token")
    p.add_argument(
        "--verify",
        type=whole_number(0),
        default=0,
        metavar="K",
        help="verify the K lowest candidates with prompts",
    )
    p.add_argument(
        "--verify-references",
        action="store_true",
        help="also verify the reference tokens (skipped by default: they are known to be unused)",
    )
    p.add_argument(
        "--refs", default=None, help="reference tokens: ids, ranges or token strings, e.g. '1-10,[unused0]'"
    )
    p.add_argument("--indicator", default=None, choices=sorted(INDICATOR_LABELS), help="main indicator")
    p.add_argument(
        "--percentile",
        type=real_number(0, 100),
        default=2.0,
        help="candidate threshold percentile (default 2)",
    )
    p.add_argument(
        "--pc1", action="store_true", help="also compute the cosine with the 1st principal component removed"
    )
    p.add_argument(
        "--device", default=None, help="verification device: cpu, cuda, cuda:1 … (default: CUDA if available)"
    )
    p.add_argument(
        "--indicator-device",
        default="cpu",
        help="where the indicators run: cpu (default), cuda, cuda:N, or auto (CUDA when present)",
    )
    p.add_argument(
        "--device-map",
        default=None,
        choices=["auto"],
        help="spread the model over GPUs, CPU memory and disk with accelerate (default: only when it does not "
        "fit one device)",
    )
    p.add_argument(
        "--max-memory",
        default=None,
        metavar="SPEC",
        help="per-device caps for --device-map, e.g. '0=20GiB,1=20GiB,cpu=64GiB' (implies --device-map auto)",
    )
    p.add_argument("--batch-size", type=whole_number(1), default=8, help="verification batch size")
    p.add_argument(
        "--max-candidates", type=whole_number(0), default=None, help="list at most this many candidates"
    )
    p.add_argument(
        "--csv", default=None, metavar="PATH", help="write the token-health table (all tokens) as CSV"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Analyse (and optionally verify) one model."""
    src = resolve_model(args.model, revision=args.revision, token=args.token)
    tok = (
        load(args.tokenizer, revision=args.revision, token=args.token)
        if args.tokenizer
        else tokenizer_for_model(src)
    )
    refs = parse_reference_spec(args.refs, tok) if args.refs else None
    max_memory = parse_max_memory(args.max_memory)
    res = analyze(
        src,
        tok,
        reference_ids=refs,
        remove_pc1=args.pc1,
        percentile=args.percentile,
        main=args.indicator,
        device=args.indicator_device,
    )
    if args.verify > 0:
        progress = stderr_progress("verification") if not args.json else None
        verify_result(
            res,
            src,
            tok,
            args.verify,
            device=args.device,
            device_map=args.device_map,
            max_memory=max_memory,
            batch_size=args.batch_size,
            progress=progress,
            include_references=args.verify_references,
        )
    if args.csv:
        try:
            stt = stt_status(tok)
        except Exception:  # STT is optional context for the table
            stt = None
        atomic_write_text(args.csv, health_table(res, stt).to_csv(index=False))
    doc = res.to_json(max_candidates=args.max_candidates)
    if args.json:
        print_json(doc)
        return 0
    print(
        f"model {doc['model']}  tokenizer {doc['tokenizer']}  tied={doc['tied']}  lm_head={doc['has_lm_head']}"
    )
    print(f"references ({len(doc['reference_ids'])}, {doc['reference_source']}):")
    for i in doc["reference_ids"][:20]:
        print(f"  {i:>7}  {doc['reference_reasons'][str(i)]}")
    st = doc["indicator_stats"]
    print(
        f"indicator: {doc['indicator_label']}  mean {st['mean']:.4f} ± {st['std']:.4f}; "
        f"{ordinal(doc['percentile'])} percentile threshold {doc['threshold']:.4f}; {doc['n_candidates']} candidates"
    )
    for n in doc["notes"]:
        print(f"note: {n}")
    pl, per = doc["placement"], doc["timings_s"].get("verify_per_candidate")
    if "input_device" in pl:
        dm = pl.get("device_map_summary")
        print(
            f"verification on {pl.get('device') or pl['input_device']} ({pl.get('reason', '')}); device map "
            + (", ".join(f"{d}: {n}" for d, n in dm.items()) if dm else "none")
            + ("" if per is None else f"; {per * 1e3:.0f} ms per candidate")
        )
    for c in doc["candidates"][: args.max_candidates or 50]:
        extra = f"  p={c['max_prob']:.2e} {c['verdict']}" if "verdict" in c else ""
        print(f"  {c['id']:>7}  {c['indicator']:.5f}  {c['token']!r:<30} {c['class']}{extra}")
    return 0
