"""`python -m analysis prune --tokenizer T --order O --text FILE … --n N --out DIR [--model M] --json`."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from .. import pruning
from ..corpora import iter_file
from ..embeddings import remap_model
from ..errors import DataError
from ..export import folder_files, write_files
from ..inputs import parse_json, read_file
from ..outputs import atomic_folder, check_output_folder
from ._common import add_force_argument, add_tokenizer_argument, load_from_args, print_json

NAME = "prune"
HELP = (
    "prune N tokens in a chosen order (merges, ids, added tokens kept consistent); optionally the model too"
)

_CLI_ORDERS = ("last-n", "frequency", "leaf-last-n", "leaf-frequency", "merge-based", "script", "score")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `prune`."""
    add_tokenizer_argument(p, "--tokenizer")
    p.add_argument("--order", required=True, choices=_CLI_ORDERS, help="pruning order")
    p.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="FILE",
        help="UTF-8 text file for token frequencies; repeat to mix several in equal byte shares",
    )
    p.add_argument("--n", type=int, required=True, help="number of tokens to prune")
    p.add_argument("--out", required=True, help="output folder (Hugging Face tokenizer folder, + model)")
    add_force_argument(p)
    p.add_argument(
        "--model", default=None, help="model folder / weight file / hub id whose embeddings to prune"
    )
    p.add_argument(
        "--init",
        default="fvt",
        choices=("fvt", "mean", "random"),
        help="init of new embedding rows (only used when ids are added)",
    )
    p.add_argument(
        "--allowed-scripts",
        default="Latin",
        help="script order: comma-separated scripts to keep (Common/Inherited always kept)",
    )
    p.add_argument(
        "--scores",
        default=None,
        metavar="FILE",
        help="score order: JSON {id: score} or [score, ...]; lowest pruned first (leaves only)",
    )
    p.add_argument(
        "--extend-text",
        action="append",
        default=[],
        metavar="FILE",
        help="after pruning, extend back by N with continued BPE training on these files",
    )
    p.add_argument("--no-stt", action="store_true", help="skip the Self-Tokenization Test of the result")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _read_lines(files: list[str]) -> list[list[str]]:
    out = []
    for f in files:
        lines = list(iter_file(f))  # bounded, strict UTF-8 (analysis.inputs)
        if not lines:
            raise DataError(f"text file {f} is empty")
        out.append(lines)
    return out


def _read_scores(path: str) -> dict[int, float]:
    data = parse_json(read_file(path), f"scores file {path}")
    try:
        if isinstance(data, list):
            scores = {i: float(v) for i, v in enumerate(data)}
        else:
            scores = {int(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError, AttributeError, OverflowError) as e:
        raise DataError(f"{path}: expected {{id: score}} or a list of scores ({e})") from e
    if not all(math.isfinite(v) for v in scores.values()):
        raise DataError(f"{path}: scores must be finite numbers (found NaN or infinity)")
    return scores


def run(args: argparse.Namespace) -> int:
    """Compute the order, prune, write the folder (and model), print a summary."""
    check_output_folder(args.out, replace=args.force)  # before the work, not after it
    tok = load_from_args(args)
    pruning.check_prunable(tok)
    parts = _read_lines(args.text)
    texts = pruning.mix_texts(parts) if parts else None
    if args.order in pruning.CORPUS_ORDERS and texts is None:
        raise DataError(f"the {args.order} order needs at least one --text FILE")
    order = pruning.compute_order(
        tok,
        args.order,
        texts,
        scores=_read_scores(args.scores) if args.scores else None,
        allowed_scripts=[s.strip() for s in args.allowed_scripts.split(",") if s.strip()],
    )
    res = pruning.prune_by_order(tok, order, args.n)
    final = res.tokenizer
    id_map = res.id_map
    added: list[str] = []
    if args.extend_text:
        ext_lines = [ln for part in _read_lines(args.extend_text) for ln in part]
        pe = pruning.prune_then_extend(tok, order, args.n, ext_lines)
        final, id_map, added = pe.tokenizer, pe.id_map, pe.added
    summary = {
        "tokenizer": tok.name,
        "order": args.order,
        "removed": len(res.removed),
        "added": len(added),
        "original_vocab_size": tok.vocab_size,
        "vocab_size": final.vocab_size,
        "merges_removed": res.merges_removed,
        "merges": len(final.merges),
        "unreachable_before": None,
        "unreachable": None,
        "removed_sample": [tok.readable(tok.id_to_token[i]) for i in res.removed[:20]],
        "out": str(Path(args.out).resolve()),
    }
    if not args.no_stt:
        summary["unreachable_before"] = len(pruning.unreachable_ids(tok))
        summary["unreachable"] = len(pruning.unreachable_ids(final))
    report = dict(summary)
    report["id_map"] = {str(k): v for k, v in id_map.items()}
    with atomic_folder(args.out, replace=args.force) as tmp:  # the folder appears complete, or not at all
        write_files(
            tmp, folder_files(final, report, base_config=final.config, report_name="prune_report.json")
        )
        if args.model:
            rep = remap_model(args.model, tok, final, id_map, tmp, init=args.init, report=report)
            summary["model"] = {k: v for k, v in rep.to_json().items() if k != "pieces_sample"}
    if args.json:
        print_json(summary)
    else:
        for k, v in summary.items():
            print(f"{k:>20}: {v}")
    return 0
