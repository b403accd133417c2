"""`python -m analysis corpus-stats --tokenizer T --text GLOB … --stat S [--executor local --tasks N --workers N]`.

Computes one corpus statistic (see :mod:`analysis.distributed`) in this process, on local cores (datatrove),
on Slurm or on Ray, and prints a summary; `--out FILE` writes the full result as JSON (counts sorted by key,
or with `--stat words --n N` the learned merges), so runs on different executors can be compared byte for byte.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import numpy as np

from ..distributed import (
    STATS,
    add_executor_arguments,
    compute,
    executor_from_args,
    never_produced_from_counts,
    train_from_words,
)
from ..distributed.stats import GROUP_BY
from ..errors import DataError
from ..outputs import atomic_write_text, strict_json
from ..progress import stderr_progress
from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "corpus-stats"
HELP = (
    "one corpus statistic (pre-tokens, training words, token ids, compression, SA-BPE counts) on any executor"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `corpus-stats`."""
    add_tokenizer_argument(p, "--tokenizer")
    p.add_argument(
        "--text",
        "--corpus",
        dest="inputs",
        action="append",
        required=True,
        metavar="PATH",
        help="file, folder, glob (quote it: 'DIR/*.devtest') or hf://datasets/… path; repeatable",
    )
    p.add_argument(
        "--stat", choices=sorted(STATS), default="pretokens", help="the statistic (default pretokens)"
    )
    p.add_argument("--n", type=int, default=None, help="words: also learn N new tokens (continued training)")
    p.add_argument("--max-token-length", type=int, default=None, help="words: longest new token")
    p.add_argument(
        "--group-by", choices=GROUP_BY, default="file", help="compression: rows per file/folder/input"
    )
    p.add_argument("--languages", default=None, help="source-words: comma-separated file stems to keep")
    p.add_argument("--top", type=int, default=10, help="print the N most frequent keys (default 10)")
    p.add_argument("--out", default=None, metavar="FILE", help="write the full result as JSON")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_executor_arguments(p)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    if args.stat == "words":
        return {"n_new": args.n} if args.n else {}
    if args.stat == "compression":
        return {"group_by": args.group_by}
    if args.stat == "source-words" and args.languages:
        return {"languages": [x.strip() for x in args.languages.split(",") if x.strip()]}
    return {}


def _key(k: Any) -> Any:
    return list(k) if isinstance(k, tuple) else k


def _top(counts: dict, n: int) -> list:
    return [[_key(k), c] for k, c in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[:n]]


def run(args: argparse.Namespace) -> int:
    """Compute the statistic, print a summary, optionally write the result."""
    tok = load_from_args(args)
    cfg = executor_from_args(args)
    if args.stat == "words" and args.n is not None and args.n <= 0:
        raise DataError("--n must be positive")
    progress = None if args.quiet else stderr_progress(args.stat)
    run_ = compute(tok, args.stat, args.inputs, options=_options(args), executor=cfg, progress=progress)
    out = run_.summary()
    out["tokenizer"] = tok.name
    full: Any = None
    r = run_.result
    if r is None:
        out["note"] = f"submitted; rerun the same command to collect the result from {run_.workdir}"
    elif args.stat == "pretokens":
        out.update(units=r.units, chars=r.chars, distinct=len(r.counts), top=_top(r.counts, args.top))
        full = {"units": r.units, "chars": r.chars, "counts": sorted(r.counts.items())}
    elif args.stat == "words":
        out.update(mode=r.mode, units=r.units, chars=r.chars, word_types=len(r.words))
        out["coverage_characters"] = [ch for ch, _ in r.characters]
        out["top"] = _top(r.words, args.top)
        full = {"units": r.units, "chars": r.chars, "words": sorted([list(k), c] for k, c in r.words.items())}
        if args.n:
            res = train_from_words(tok, r, args.n, max_token_length=args.max_token_length)
            out["new_tokens"] = res.n_new
            out["first_new"] = [tok.readable(t) for t in res.new_tokens(20)]
            full = {"merges": [list(m) for m in res.merges()], "new_tokens": res.new_tokens()}
    elif args.stat == "token-ids":
        nz = np.flatnonzero(r)
        out.update(tokens=int(r.sum()), distinct_ids=int(nz.size))
        out["top"] = [
            [tok.readable(tok.id_to_token.get(int(i), "")), int(r[i])] for i in np.argsort(-r)[: args.top]
        ]
        full = {"counts": r.tolist()}
    elif args.stat == "produced-ids":
        never = never_produced_from_counts(tok, r)
        out.update(tokens=sum(r.values()), distinct_ids=len(r), never_produced=len(never))
        full = {"counts": sorted(r.items()), "never_produced": never}
    elif args.stat == "compression":
        rows = {
            g: {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            for g, row in r.items()
        }
        out["groups"] = rows
        full = rows
    elif args.stat == "source-words":
        out.update(records=r.n_records, bytes_text=r.n_bytes, repos=len(r.repos), languages=r.languages)
        out["word_types"] = len(r.words)
        full = {
            "repos": r.repos,
            "languages": r.languages,
            "words": [
                [w, f, list(map(list, d)), list(map(list, e))]
                for w, f, d, e in zip(r.words, r.freqs, r.repo_dist, r.lang_dist)
            ],
        }
    if args.out and full is not None:
        atomic_write_text(args.out, strict_json(full, indent=None))
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
        if k in (
            "stat",
            "executor",
            "shards",
            "bytes",
            "seconds",
            "workdir",
            "tokenizer",
            "map_tasks_run",
            "map_tasks_skipped",
            "reduce_tasks_run",
            "submitted",
        ):
            continue
        if k == "groups":
            for g, row in v.items():
                w(
                    f"  {g}: bytes/token {row['bytes_per_token']}, fertility {row['fertility']}, tokens {row['tokens']:,}\n"
                )
            continue
        w(f"  {k}: {v}\n")
    return 0
