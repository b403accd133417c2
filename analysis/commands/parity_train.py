"""`python -m analysis parity-train --vocab-size N [--langs all] [--variant base] [--out DIR] [--json]`.

Parity-aware BPE vs plain BPE at equal vocabulary size on FLORES-200 (see :mod:`analysis.bpe.parity`): premium
against English per language (mean, maximum, Gini) next to the compression cost (bytes/token).
"""

from __future__ import annotations

import argparse

from analysis.bpe.parity import MAX_VOCAB_SIZE, VARIANTS, parity_comparison
from analysis.core.inputs import whole_number
from analysis.core.outputs import check_output_folder
from analysis.texts.flores import ENGLISH, FLORES_TRAIN_LINES

from ._common import add_force_argument, flores_langs, print_json

NAME = "parity-train"
HELP = "parity-aware BPE vs plain BPE on FLORES: premium vs English across languages and the compression cost"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `parity-train`."""
    p.add_argument(
        "--vocab-size",
        type=whole_number(300, MAX_VOCAB_SIZE),
        default=8000,
        help="vocabulary size of both tokenizers (default 8000)",
    )
    p.add_argument("--langs", default="all", help="FLORES codes, comma-separated, or 'all' (default)")
    p.add_argument(
        "--n-train", type=whole_number(1), default=700, help="training lines per language (default 700)"
    )
    p.add_argument(
        "--n-dev",
        type=whole_number(0),
        default=100,
        help=f"parallel development lines per language after the training lines (default 100; lines "
        f"{FLORES_TRAIN_LINES + 1}– are held out)",
    )
    p.add_argument("--variant", choices=VARIANTS, default="base", help="parity-aware variant (default base)")
    p.add_argument(
        "--global-merges",
        type=whole_number(0),
        default=0,
        help="plain-BPE merges before parity mode (default 0)",
    )
    p.add_argument(
        "--min-frequency", type=whole_number(0), default=0, help="minimum pair frequency (default 0)"
    )
    p.add_argument("--reference", default=ENGLISH, help=f"premium reference language (default {ENGLISH})")
    p.add_argument("--no-cache", action="store_true", help="retrain even when the result is cached")
    p.add_argument("--rows", action="store_true", help="also print the per-language rows (text output)")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="write both tokenizers and the report to a new folder"
    )
    add_force_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Train both tokenizers (or read the cache), measure, print, optionally write them."""
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the training, not after it
    comparison = parity_comparison(
        args.vocab_size,
        flores_langs(args.langs),
        n_train=args.n_train,
        n_dev=args.n_dev,
        variant=args.variant,
        reference=args.reference,
        min_frequency=args.min_frequency,
        global_merges=args.global_merges,
        use_cache=not args.no_cache,
        keep_tokenizers=bool(args.out),
    )
    if args.out:
        comparison.save(args.out, replace=args.force)
    res = comparison.to_json()
    if args.json:
        print_json(res)
        return 0
    p = res["params"]
    print(
        f"parity-aware ({p['variant']}) vs plain BPE, {p['vocab_size']:,} tokens, {len(p['languages'])} FLORES "
        f"languages; train lines 1–{p['n_train']}, dev {p['n_train'] + 1}–{p['n_train'] + p['n_dev']}, "
        f"held out {FLORES_TRAIN_LINES + 1}–"
    )
    print(f"{'':8} {'premium mean':>12} {'max':>7} {'Gini':>7} {'bytes/token':>11} {'train s':>8}")
    for kind in ("plain", "parity"):
        s, r = res[kind]["summary"], res[kind]
        print(
            f"{kind:8} {_num(s['premium_mean'], '>12.3f')} {_num(s['premium_max'], '>7.3f')} "
            f"{_num(s['premium_gini'], '>7.4f')} {_num(s['bytes_per_token'], '>11.3f')} {r['seconds']:>8.1f}"
        )
    c = res["cost"]
    print(
        f"parity − plain: premium mean {_num(c['premium_mean'], '+.3f')}, max {_num(c['premium_max'], '+.3f')}, "
        f"Gini {_num(c['premium_gini'], '+.4f')}; bytes/token {_num(c['bytes_per_token'], '+.3f')} "
        f"({_num(c['bytes_per_token_relative'], '+.1%')})"
    )
    if args.rows:
        plain = {r["lang"]: r for r in res["plain"]["rows"]}
        print(f"{'lang':10} {'premium plain':>13} {'parity':>7} {'bytes/token plain':>17} {'parity':>7}")
        for r in res["parity"]["rows"]:
            q = plain[r["lang"]]
            print(
                f"{r['lang']:10} {q['premium'] or 0:>13.3f} {r['premium'] or 0:>7.3f} "
                f"{q['bytes_per_token'] or 0:>17.3f} {r['bytes_per_token'] or 0:>7.3f}"
            )
    if args.out:
        print(f"written to {res['out']}")
    return 0


def _num(value: float | None, spec: str) -> str:
    """A number in `spec`, or "–" (right-aligned like it) when it was not measured."""
    if value is None:
        width = "".join(ch for ch in spec.split(".")[0] if ch.isdigit())
        return f"{'–':>{width or 1}}"
    return format(value, spec)
