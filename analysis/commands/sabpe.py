"""`python -m analysis sabpe`: train plain BPE and source-attributed BPE on code, compare them, export."""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

from ..errors import DataError
from ..export import write_folder
from ..outputs import check_output_folder
from ..paths import shared_assets
from ..sabpe import (
    DEFAULT_PRIORITY,
    PRIORITIES,
    SkipRule,
    code_dir,
    collect_words,
    evaluate,
    normalize_priority,
    read_code,
    train,
)
from ..sources import load
from ._common import add_force_argument, print_json

NAME = "sabpe"
HELP = (
    "train source-attributed BPE (SA-BPE) on repository/language-attributed code and compare with plain BPE"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `sabpe`."""
    p.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="DIR_OR_FILE",
        help="JSON-lines code records {repo, language, text} (.jsonl/.jsonl.gz or a folder; repeatable; "
        "default: the shared code corpus)",
    )
    p.add_argument("--languages", default=None, help="comma-separated languages (file stems) to train on")
    p.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="DIR_OR_FILE",
        help="held-out records for the metrics (default: heldout/ next to the corpus, when present)",
    )
    p.add_argument(
        "--base", default=None, help="tokenizer whose normalizer + pre-tokenizer are used (default gpt2)"
    )
    p.add_argument(
        "--vocab-size", type=int, required=True, help="vocabulary size (256 bytes + merges + specials)"
    )
    p.add_argument(
        "--priority",
        default=DEFAULT_PRIORITY,
        help=f"merge priority: {', '.join(PRIORITIES)} (default %(default)s)",
    )
    p.add_argument(
        "--max-share", type=float, default=None, help="skip pairs whose top repository holds > this share"
    )
    p.add_argument(
        "--min-sources", type=int, default=1, help="skip pairs found in fewer repositories (paper R_t)"
    )
    p.add_argument(
        "--min-languages", type=int, default=1, help="skip pairs found in fewer languages (paper L_t)"
    )
    p.add_argument(
        "--max-files-per-repo", type=int, default=None, help="files kept per repository and language"
    )
    p.add_argument(
        "--max-bytes-per-repo", type=int, default=None, help="bytes kept per repository and language"
    )
    p.add_argument("--no-baseline", action="store_true", help="do not train the plain-BPE baseline")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="write the SA-BPE tokenizer folder + history.csv here"
    )
    add_force_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _default_base() -> str:
    local = shared_assets() / "tokenizers" / "gpt2"
    return str(local) if local.is_dir() else "openai-community/gpt2"


def run(args: argparse.Namespace) -> int:
    """Train, evaluate and (with --out) export."""
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the work, not after it
    priority = normalize_priority(args.priority)
    if args.max_share is not None and not 0 < args.max_share <= 1:
        raise DataError("--max-share must be in (0, 1]")
    skip = SkipRule(min_repos=args.min_sources, min_languages=args.min_languages, max_share=args.max_share)
    base = load(args.base or _default_base())
    langs = [x.strip() for x in args.languages.split(",") if x.strip()] if args.languages else None
    corpus = args.corpus or [code_dir()]
    kw = {"max_files_per_repo": args.max_files_per_repo, "max_bytes_per_repo": args.max_bytes_per_repo}
    records = read_code(corpus, languages=langs, **kw)
    held_paths = args.heldout or [
        Path(c) for c in corpus if Path(c).is_dir() and (Path(c) / "heldout").is_dir()
    ]
    heldout = []
    if held_paths:
        held_langs = langs
        heldout = [
            r.text for r in read_code(held_paths, languages=held_langs, heldout=not args.heldout, **kw)
        ]
    sw = collect_words(base, records)
    runs = {}
    if not args.no_baseline and (priority != "F" or skip.active):
        runs["bpe"] = train(base, sw, args.vocab_size, priority="F", name="BPE")
    runs["sabpe"] = train(
        base, sw, args.vocab_size, priority=priority, skip=skip, name=f"SA-BPE [{priority}]"
    )
    out: dict = {"corpus": [str(c) for c in corpus], "records": len(records), "heldout_records": len(heldout)}
    for key, res in runs.items():
        out[key] = res.summary()
        if heldout:
            out[key]["metrics"] = evaluate(res, heldout)
        out[key]["most_concentrated"] = [r["token"] for r in res.concentrated(10)]
    sa = runs["sabpe"]
    if args.out:
        rows = sa.history_records()
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["step"])
        w.writeheader()
        w.writerows(rows)
        folder = write_folder(
            sa.tokenizer,
            args.out,
            out,
            report_name="sabpe_report.json",
            replace=args.force,
            extra={"history.csv": buf.getvalue().encode("utf-8")},
        )
        out["out"] = str(folder.resolve())
    if args.json:
        print_json(out)
        return 0
    print(
        f"{len(records):,} records, {sa.n_repos} repositories, {sa.n_languages} languages, {sa.word_types:,} word types"
    )
    for key, res in runs.items():
        line = f"{key:6s} {res.label}: {len(res.merges):,} merges, {res.n_skipped:,} skipped, {res.seconds['train']:.1f} s"
        if "metrics" in out[key]:
            m = out[key]["metrics"]
            line += (
                f"; held-out bytes/token {m['bytes_per_token']:.4f}, single-repo tokens {m['single_repo_share']:.2%},"
                f" MTL {m['mean_token_length']:.2f}, Gini {m['gini']:.3f}, STT unreachable {m['stt_unreachable']}"
            )
        print(line)
    if args.out:
        print(f"written to {out['out']}")
    return 0
