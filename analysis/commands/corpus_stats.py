"""`python -m analysis corpus-stats --tokenizer T --text GLOB … --stat S [--executor local --tasks N --workers N]`.

Computes one corpus statistic (see :mod:`analysis.jobs`) in this process, on local cores (datatrove),
on Slurm or on Ray, and prints a summary; `--out FILE` writes the full result as JSON (counts sorted by key,
or with `--stat words --n N` the learned merges), so runs on different executors can be compared byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from analysis.core.inputs import whole_number
from analysis.core.outputs import atomic_write_text, strict_json
from analysis.jobs import STATS
from analysis.jobs.result import CorpusStatsResult
from analysis.jobs.stats import GROUP_BY

from ._common import (
    add_corpus_arguments,
    add_tokenizer_argument,
    compute_from_args,
    load_from_args,
    print_json,
)

NAME = "corpus-stats"
HELP = (
    "one corpus statistic (pre-tokens, training words, token ids, compression, SA-BPE counts) on any executor"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `corpus-stats`."""
    add_tokenizer_argument(p, "--tokenizer")
    p.add_argument(
        "--stat", choices=sorted(STATS), default="pretokens", help="the statistic (default pretokens)"
    )
    p.add_argument(
        "--n", type=whole_number(1), default=None, help="words: also learn N new tokens (continued training)"
    )
    p.add_argument("--max-token-length", type=whole_number(1), default=None, help="words: longest new token")
    p.add_argument(
        "--group-by", choices=GROUP_BY, default="file", help="compression: rows per file/folder/input"
    )
    p.add_argument("--languages", default=None, help="source-words: comma-separated file stems to keep")
    p.add_argument(
        "--top", type=whole_number(0), default=10, help="print the N most frequent keys (default 10)"
    )
    p.add_argument("--out", default=None, metavar="FILE", help="write the full result as JSON")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_corpus_arguments(p, required=True)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    if args.stat == "words":
        return {"n_new": args.n} if args.n else {}
    if args.stat == "compression":
        return {"group_by": args.group_by}
    if args.stat == "source-words" and args.languages:
        return {"languages": [x.strip() for x in args.languages.split(",") if x.strip()]}
    return {}


_RUN_KEYS = ("stat", "executor", "shards", "bytes", "seconds", "workdir", "tokenizer", "map_tasks_run",
             "map_tasks_skipped", "reduce_tasks_run", "submitted")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Compute the statistic, print a summary, optionally write the result."""
    tok = load_from_args(args)
    run_ = compute_from_args(tok, args.stat, args, options=_options(args))
    result = CorpusStatsResult(tok, run_, top=args.top, n_new=args.n, max_token_length=args.max_token_length)
    out = result.to_json()
    data = result.data_json()
    if args.out and data is not None:
        atomic_write_text(args.out, strict_json(data, indent=None))
        out["out"] = args.out
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    w(
        f"{args.stat} of {tok.name} on {out['shards']} file(s), {out['bytes'] / 1e6:,.1f} MB — executor {out['executor']}"
    )
    if "workdir" in out:
        w(
            f", workdir {out['workdir']} (map tasks run {out['map_tasks_run']}, skipped {out['map_tasks_skipped']})"
        )
    w(f", {out['seconds'].get('total', 0):.2f} s\n")
    for k, v in out.items():
        if k in _RUN_KEYS:
            continue
        if k == "groups":
            for g, row in v.items():
                w(
                    f"  {g}: bytes/token {row['bytes_per_token']}, fertility {row['fertility']}, tokens {row['tokens']:,}\n"
                )
            continue
        w(f"  {k}: {v}\n")
    return 0
