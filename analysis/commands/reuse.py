"""`python -m analysis reuse`: R-BPE token reuse — retrain reusable ids for a target script, measure, export."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..corpora import iter_file
from ..flores import FLORES_TRAIN_LINES, split_lines
from ..outputs import atomic_folder, check_output_folder
from ..reuse import build_reuse_tokenizer, compare, reused_script_demo, target_training_texts
from ._common import add_force_argument, add_tokenizer_argument, load_from_args, print_json

NAME = "reuse"
HELP = (
    "R-BPE token reuse: map a new target-language BPE onto ids of unused scripts (vocabulary size unchanged)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `reuse`."""
    add_tokenizer_argument(p)
    p.add_argument("--target", default="arabic", help="target script (default arabic)")
    p.add_argument(
        "--preserve",
        default="latin,greek",
        help="comma-separated scripts whose tokens are kept (default latin,greek)",
    )
    p.add_argument(
        "--min-reusable", type=int, default=20000, help="threshold h on reusable ids (default 20000)"
    )
    p.add_argument(
        "--train-lang",
        default="arb_Arab",
        help=f"FLORES language for training (first {FLORES_TRAIN_LINES} lines) and held-out metrics (the rest)",
    )
    p.add_argument(
        "--text", action="append", default=[], metavar="FILE", help="extra training text (repeatable)"
    )
    p.add_argument(
        "--no-corpora",
        action="store_true",
        help="train on FLORES (+ --text) only, without the shared corpora of --train-lang (faster, weaker)",
    )
    p.add_argument(
        "--max-words",
        type=int,
        default=200_000,
        help="most frequent words taken from the word-frequency list",
    )
    p.add_argument(
        "--reference-lang", default="eng_Latn", help="FLORES language for parity (default eng_Latn)"
    )
    p.add_argument("--out", default=None, metavar="DIR", help="write the R-BPE tokenizer folder here")
    add_force_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Build the R-BPE tokenizer, compare fertility on held-out FLORES, optionally save it."""
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the work, not after it
    tok = load_from_args(args)
    texts = target_training_texts(args.train_lang, corpora=not args.no_corpora, max_words=args.max_words)
    for f in args.text:
        texts += list(iter_file(f))
    t0 = time.perf_counter()
    rt = build_reuse_tokenizer(
        tok,
        texts,
        target=args.target,
        preserved=[s for s in args.preserve.split(",") if s.strip()],
        min_reusable=args.min_reusable,
    )
    seconds = time.perf_counter() - t0
    heldout = split_lines(args.train_lang)[1]
    reference = split_lines(args.reference_lang)[1] if args.reference_lang else None
    cmp = compare(rt, heldout, reference)
    demo = reused_script_demo(rt)
    rep = {k: v for k, v in rt.info.items() if k not in ("classes", "reusable_blocks")}
    rep["seconds"] = seconds
    rep["heldout"] = {
        "lang": args.train_lang,
        "lines": cmp["lines"],
        "fertility_before": cmp["before"]["fertility"],
        "fertility_after": cmp["after"]["fertility"],
        "fertility_change": cmp["fertility_change"],
        "bytes_per_token_before": cmp["before"]["bytes_per_token"],
        "bytes_per_token_after": cmp["after"]["bytes_per_token"],
        "parity_before": cmp.get("parity_before"),
        "parity_after": cmp.get("parity_after"),
    }
    if demo:
        rep["reused_script_demo"] = {k: demo[k] for k in ("text", "decoded", "n_reused")}
    if args.out:
        with atomic_folder(args.out, replace=args.force) as tmp:  # complete, or not there at all
            rt.save(tmp)
        rep["out"] = str(Path(args.out).resolve())
    if args.json:
        print_json(rep)
        return 0
    h = rep["heldout"]
    sel = ", ".join(f"{k} ({v})" for k, v in rt.info["selected_classes"].items())
    print(f"R-BPE on {tok.name}: target {args.target}, preserved {', '.join(rt.info['preserved'])}")
    print(f"  {len(rt.info['selected_classes'])} reusable classes: {sel}")
    print(
        f"  reusable ids {rt.info['reusable_count']:,}; new vocabulary {rt.info['new_vocab_size']:,} "
        f"({rt.info['common_tokens']:,} common, {rt.info['reused_tokens']:,} on reused ids); {seconds:.1f} s"
    )
    print(
        f"  {args.train_lang} held-out ({h['lines']} lines): fertility {h['fertility_before']:.3f} → "
        f"{h['fertility_after']:.3f} ({h['fertility_change']:+.1%}); bytes/token "
        f"{h['bytes_per_token_before']:.3f} → {h['bytes_per_token_after']:.3f}"
    )
    if h["parity_before"] is not None:
        print(f"  parity vs {args.reference_lang}: {h['parity_before']:.3f} → {h['parity_after']:.3f}")
    if demo:
        print(f"  reused script now decodes as the target: {demo['text'][:50]!r} → {demo['decoded'][:50]!r}")
    if args.out:
        print(f"  written to {rep['out']}")
    return 0
