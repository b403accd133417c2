"""`python -m analysis dynamic TOKENIZER --text "..." [--file F] [--merges N] [--boundary B] [--json]`.

Batch-level dynamic tokenization (see :mod:`analysis.dynamic`): every `--text` and every non-empty line of
`--file` (and `--flores LANG` lines) is one example of the batch; prints the lengths before/after and the
merges performed in order.
"""

from __future__ import annotations

import argparse

from .. import flores
from ..corpora import iter_file, with_budget
from ..dynamic import BOUNDARIES, MAX_BATCH_CHARS, check_batch_size, dynamic_tokenize
from ..errors import DataError
from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "dynamic"
HELP = "dynamic tokenization of a batch: merge its most frequent adjacent token pairs (Feher et al.)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `dynamic`."""
    add_tokenizer_argument(p)
    p.add_argument("--text", action="append", default=[], help="one example of the batch (repeat for more)")
    p.add_argument(
        "--file", action="append", default=[], help="UTF-8 text file, one example per non-empty line"
    )
    p.add_argument("--flores", default=None, metavar="LANG", help="add FLORES-200 devtest lines of LANG")
    p.add_argument("--n", type=int, default=32, help="how many FLORES lines (default 32)")
    p.add_argument("--merges", type=int, default=100, help="maximum number of merges (default 100)")
    p.add_argument(
        "--boundary", choices=BOUNDARIES, default="pretokens", help="merge boundary (default pretokens)"
    )
    p.add_argument(
        "--target", type=float, default=None, help="also report the merges needed for this reduction %%"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.text)
    for f in args.file:  # bounded line pieces, strict UTF-8; never more than the batch limit (+1) is read
        texts += list(with_budget(iter_file(f), MAX_BATCH_CHARS + 1))
        check_batch_size(texts)
    if args.flores:
        texts += flores.lines(args.flores)[: max(args.n, 0)]
    if not texts:
        raise DataError("give the batch with --text, --file or --flores")
    return texts


def run(args: argparse.Namespace) -> int:
    """Tokenize the batch dynamically and print the outcome."""
    tok = load_from_args(args)
    res = dynamic_tokenize(tok, _texts(args), args.merges, args.boundary)
    target = None if args.target is None else res.merges_for_reduction(args.target)
    if args.json:
        d = res.to_json()
        if args.target is not None:
            d["target_reduction_pct"] = args.target
            d["merges_for_target"] = target
        print_json(d)
        return 0
    before, after = sum(res.lengths_before), sum(res.lengths_after)
    print(f"tokenizer {res.tokenizer} · boundary {res.boundary} · {len(res.tokens)} sequences")
    print(
        f"tokens before {before} → after {after} ({res.reduction_pct:.2f}% shorter) with {len(res.merges)} merges"
    )
    print(f"average length {res.merges2seqlen[0]:.2f} → {res.merges2seqlen[-1]:.2f}")
    if res.exhausted:
        print("stopped early: no valid pair left (boundary level reached)")
    if args.target is not None:
        print(f"merges for {args.target:g}% reduction: {target if target is not None else 'not reached'}")
    for k, m in enumerate(res.merges, 1):
        print(f"{k:>5}  {m.left!r} + {m.right!r} → {m.merged!r}  (count {m.count}, replaced {m.replaced})")
    return 0
