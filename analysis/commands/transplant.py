"""`python -m analysis transplant`: give a model another tokenizer — rows of shared tokens copied, the rest
initialised (OMP, FVT, mean, MVN, random) — write a Hugging Face folder (and a GGUF), then measure it like every
edit: the model check's bits per byte per language on the same held-out bytes (``--langs``; ``--no-check`` skips
it)."""

from __future__ import annotations

import argparse
import sys

from analysis.adapt.embeddings import INIT_HELP, INITS
from analysis.adapt.omp import DEFAULT_ANCHORS, SPACES
from analysis.adapt.transplant import DEFAULT_CANDIDATES, DEFAULT_K, read_for_model_check, transplant
from analysis.core.inputs import whole_number
from analysis.core.outputs import check_output_folder
from analysis.core.progress import scaled, stderr_progress
from analysis.evaluate.model_check import (
    DEFAULT_LANGS,
    HELDOUT_LINES,
    heldout_texts,
    load_pair,
    model_check,
)
from analysis.tokenizer.sources import load

from ._common import add_force_argument, flores_langs, print_json
from ._gguf import add_gguf_arguments, check_gguf_arguments

NAME = "transplant"
HELP = "give a model another tokenizer (shared rows copied, the rest initialised) and measure it per language"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `transplant`."""
    p.add_argument(
        "--model", required=True, metavar="A", help="the model: folder, .safetensors/.gguf file or hub id"
    )
    p.add_argument("--tokenizer", required=True, metavar="B",
                   help="the tokenizer it gets: folder, tokenizer.json, .gguf file or hub id")  # fmt: skip
    p.add_argument("--init", choices=INITS, default="omp",
                   help="rows of B's tokens A lacks: " + "; ".join(f"{k} = {v}" for k, v in INIT_HELP.items()))  # fmt: skip
    p.add_argument(
        "--k", type=whole_number(1), default=DEFAULT_K, help=f"OMP atoms per token (default {DEFAULT_K})"
    )
    p.add_argument("--omp-anchors", type=whole_number(1), default=DEFAULT_ANCHORS, metavar="N",
                   help=f"OMP dictionary: the first N shared tokens (A's id order; default {DEFAULT_ANCHORS}); "
                   "without a donor, in the embed space, the rows of the new tokens' FVT pieces join them")  # fmt: skip
    p.add_argument("--omp-candidates", type=whole_number(0), default=DEFAULT_CANDIDATES, metavar="C",
                   help=f"OMP screening: atoms chosen among each token's C most correlated anchors (0: exact OMP; "
                   f"default {DEFAULT_CANDIDATES})")  # fmt: skip
    p.add_argument("--donor", default=None, metavar="MODEL",
                   help="OMP: a model that uses tokenizer B (folder, weight file, GGUF or hub id): new tokens are "
                   "coded in its embedding spaces, as Goddard & Fernandes Neto do (default: no donor, --omp-space)")  # fmt: skip
    p.add_argument("--omp-space", choices=SPACES, default="embed",
                   help="OMP without a donor: embed = the token's FVT row coded over the shared tokens' rows "
                   "(default); hidden = its hidden state at --omp-layer over theirs")  # fmt: skip
    p.add_argument("--omp-layer", type=whole_number(0), default=None, metavar="L",
                   help="OMP: the hidden layer the tokens are compared at (default the middle one)")  # fmt: skip
    p.add_argument("--seed", type=whole_number(0), default=0, help="seed of the mvn/random init")
    p.add_argument("--out", required=True, metavar="DIR", help="write the transplanted model folder here")
    add_force_argument(p)
    add_gguf_arguments(p)
    p.add_argument("--langs", default=",".join(DEFAULT_LANGS),
                   help=f"model check: comma-separated FLORES codes, or all (default {','.join(DEFAULT_LANGS)}, "
                   "as model-check)")  # fmt: skip
    p.add_argument("--lines", type=whole_number(1), default=None, metavar="N",
                   help=f"model check: held-out lines per language (the first N of the {HELDOUT_LINES}; default all, "
                   "as model-check)")  # fmt: skip
    p.add_argument("--no-check", action="store_true", help="write the folder without running the model check")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    """Transplant, write, measure; print text or JSON."""
    check_gguf_arguments(args)
    check_output_folder(args.out, replace=args.force)
    texts = (
        None if args.no_check else heldout_texts(flores_langs(args.langs), args.lines)
    )  # bad codes: before the work
    tok = load(args.tokenizer)
    progress = None if args.quiet or args.json else stderr_progress("transplant")
    res = transplant(args.model, tok, args.out, init=args.init, k=args.k, seed=args.seed, omp_layer=args.omp_layer,
                     omp_anchors=args.omp_anchors, omp_candidates=args.omp_candidates or None,
                     omp_space=args.omp_space, donor=args.donor, gguf=args.gguf,
                     gguf_type=args.gguf_type, replace=args.force,
                     progress=scaled(progress, 0, 0.6 if texts else 1.0))  # fmt: skip
    doc = res.to_json()
    if texts:
        original, edited = load_pair(args.model, args.out, reader=read_for_model_check)
        check = model_check(original, edited, texts, progress=scaled(progress, 0.6, 1.0))
        cj = check.to_json()
        doc["languages"] = cj["languages"]
        doc["check"] = {k: cj[k] for k in ("text", "prefix", "window", "stride", "seconds", "n_new_tokens",
                                            "n_removed_tokens", "complete")}  # fmt: skip
    if args.json:
        print_json(doc)
        return 0
    _print(doc)
    return 0


def _print(doc: dict) -> None:
    w = sys.stdout.write
    w(f"{doc['model']} ← {doc['tokenizer']} ({doc['init']}{'' if doc['k'] is None else ', k ' + str(doc['k'])}): "
      f"{doc['rows']:,} rows, {doc['copied']:,} copied, {doc['initialised']:,} initialised; "
      f"{doc['seconds']:.1f} s, peak memory {doc['peak_rss_bytes'] / 2**30:.2f} GiB\n")  # fmt: skip
    for r in doc["roles"]:
        w(f"  {r['role']}: {r['b_token']!r} ← {r['a_token']!r} ({r['status']})\n")
    for n in doc["notes"] + doc["warnings"]:
        w(f"  note: {n}\n")
    for c in doc.get("languages", []):
        w(f"  {c['lang']}: BPB {c['bpb_original']:.4f} → {c['bpb_edited']:.4f} ({c['delta_bpb']:+.4f}); tokens/byte "
          f"{c['tokens_per_byte_original']:.4f} → {c['tokens_per_byte_edited']:.4f}\n")  # fmt: skip
    if doc.get("gguf"):
        w(f"  GGUF: {doc['gguf']['file']} ({doc['gguf'].get('bytes', 0):,} bytes)\n")
    w(f"  written to {doc['out']}\n")
