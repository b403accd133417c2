"""`python -m analysis extend`: extend a tokenizer with N new tokens learned from text, and export it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..corpora import Corpus, Source, corpus, from_paths, iter_file
from ..errors import DataError
from ..export import write_folder
from ..extension import METHODS, extension_report, plan
from ..flores import FLORES_TRAIN_LINES
from ..outputs import check_output_folder
from ._common import add_force_argument, add_tokenizer_argument, load_from_args, print_json

NAME = "extend"
HELP = "extend a tokenizer: continued BPE training or a naive baseline; writes a Hugging Face folder"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `extend`."""
    add_tokenizer_argument(p, "--tokenizer")
    p.add_argument(
        "--method", choices=METHODS, default="continued", help="extension method (default continued)"
    )
    p.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="FILE",
        help="training text: .txt/.jsonl (optionally .gz), a .zip of them or a folder; repeatable",
    )
    p.add_argument(
        "--flores",
        action="append",
        default=[],
        metavar="LANG",
        help=f"also train on the first {FLORES_TRAIN_LINES} FLORES-200 devtest lines of LANG (repeatable)",
    )
    p.add_argument("--max-chars", type=int, default=None, help="character budget of the training text")
    p.add_argument("--n", type=int, required=True, help="number of new tokens")
    p.add_argument("--max-token-length", type=int, default=None, help="longest new token, in characters")
    p.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="FILE",
        help="held-out text for bytes/token before/after (repeatable; first one is the headline)",
    )
    p.add_argument(
        "--heldout-flores",
        action="append",
        default=[],
        metavar="LANG",
        help=f"held-out FLORES lines {FLORES_TRAIN_LINES + 1}–1012 of LANG (repeatable)",
    )
    p.add_argument("--out", default=None, metavar="DIR", help="write the extended tokenizer folder here")
    add_force_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _training_corpus(args: argparse.Namespace) -> Corpus:
    srcs = [Source("flores-train", f"{lang}:{FLORES_TRAIN_LINES}") for lang in args.flores]
    if args.text:
        srcs += list(from_paths(args.text).sources)
    if not srcs:
        raise DataError("give training text with --text FILE (or --flores LANG)")
    return corpus(*srcs, max_chars=args.max_chars)


def run(args: argparse.Namespace) -> int:
    """Train, extend, measure and (with --out) export."""
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the work, not after it
    tok = load_from_args(args)
    text = _training_corpus(args)
    heldout: dict[str, list[str]] = {}
    for f in args.heldout:
        lines = list(iter_file(f))
        if not lines:
            raise DataError(f"held-out file {f} is empty")
        heldout[Path(f).name] = lines
    for lang in args.heldout_flores:
        heldout[f"{lang} (FLORES held-out)"] = list(
            Source("flores-heldout", f"{lang}:{FLORES_TRAIN_LINES}").units()
        )
    t0 = time.perf_counter()
    p = plan(tok, args.method, text, args.n, max_token_length=args.max_token_length)
    ext = p.apply(args.n)
    seconds = time.perf_counter() - t0
    chars = p.training.chars if p.training is not None else None
    rep = extension_report(
        ext, n_requested=args.n, text=text.label, text_chars=chars, heldout=heldout or None, seconds=seconds
    )
    if args.out:
        write_folder(ext.tokenizer, args.out, rep, replace=args.force)
        rep["out"] = str(Path(args.out).resolve())
    if args.json:
        rep_short = {k: v for k, v in rep.items() if k != "added_tokens"}
        rep_short["first_added"] = [a["text"] for a in rep["added_tokens"][:50]]
        print_json(rep_short)
    else:
        print(
            f"{rep['method_label']} on {tok.name}: added {rep['added']} tokens "
            f"({rep['merges_added']} merges), {rep['unreachable_added']} STT-unreachable, {seconds:.1f} s"
        )
        if heldout:
            for name, h in rep["heldout"].items():
                print(
                    f"  {name}: bytes/token {h['bytes_per_token_before']:.4f} → {h['bytes_per_token_after']:.4f}"
                    f" ({h['delta_rel']:+.2%})"
                )
        if args.out:
            print(f"  written to {rep['out']}")
    return 0
