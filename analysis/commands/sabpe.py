"""`python -m analysis sabpe`: train plain BPE and source-attributed BPE on code, compare them, export.

The per-source word counts come from the corpus executor (:mod:`analysis.jobs`, statistic
``source-words``): in this process for small inputs, on local cores, Slurm or Ray, with the same result; the
merge loop runs here.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from analysis.bpe.parity import VARIANTS
from analysis.core.inputs import real_number, whole_number
from analysis.core.outputs import check_output_folder
from analysis.core.paths import shared_assets
from analysis.core.progress import stderr_progress
from analysis.jobs import add_executor_arguments, compute, executor_from_args
from analysis.methods.sabpe import (
    DEFAULT_PRIORITY,
    PRIORITIES,
    SabpeComparison,
    SkipRule,
    normalize_priority,
    records_by_language,
    train,
    train_parity_baseline,
)
from analysis.methods.sabpe.defaults import DEFAULT_MIN_LANGUAGES, DEFAULT_MIN_SOURCES, DEFAULT_PARITY_VARIANT
from analysis.texts.code import CodeRecord, code_dir, read_code
from analysis.texts.shards import iter_records, resolve
from analysis.tokenizer.export import write_folder
from analysis.tokenizer.sources import load

from ._common import add_force_argument, add_robustness_argument, print_json, print_robustness

NAME = "sabpe"
HELP = (
    "train source-attributed BPE (SA-BPE) on repository/language-attributed code and compare with plain BPE"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `sabpe`."""
    p.add_argument(
        "--corpus",
        "--text",
        dest="corpus",
        action="append",
        default=[],
        metavar="PATH",
        help="JSON-lines code records {repo, language, text}: .jsonl/.jsonl.gz/.parquet files, folders, globs "
        "(quote them) or hf:// paths; repeatable (default: the shared code corpus)",
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
        "--vocab-size",
        type=whole_number(1),
        required=True,
        help="vocabulary size (256 bytes + merges + specials)",
    )
    p.add_argument(
        "--priority",
        default=DEFAULT_PRIORITY,
        help=f"merge priority: {', '.join(PRIORITIES)} (default %(default)s)",
    )
    p.add_argument(
        "--max-share",
        type=real_number(0, 1, open_low=True),
        default=None,
        help="skip pairs whose top repository holds > this share",
    )
    p.add_argument(
        "--min-sources",
        type=whole_number(1),
        default=DEFAULT_MIN_SOURCES,
        help=f"skip pairs found in fewer repositories (paper R_t; default {DEFAULT_MIN_SOURCES}: off)",
    )
    p.add_argument(
        "--min-languages",
        type=whole_number(1),
        default=DEFAULT_MIN_LANGUAGES,
        help=f"skip pairs found in fewer languages (paper L_t; default {DEFAULT_MIN_LANGUAGES}: off)",
    )
    p.add_argument(
        "--max-files-per-repo",
        type=whole_number(1),
        default=None,
        help="files kept per repository and language",
    )
    p.add_argument(
        "--max-bytes-per-repo",
        type=whole_number(1),
        default=None,
        help="bytes kept per repository and language",
    )
    p.add_argument("--no-baseline", action="store_true", help="do not train the plain-BPE baseline")
    p.add_argument(
        "--parity",
        action="store_true",
        help="also train the parity-aware BPE baseline, the code languages as parity languages (reads the "
        "corpus text in this process)",
    )
    p.add_argument(
        "--parity-variant", choices=VARIANTS, default=DEFAULT_PARITY_VARIANT, help="parity-aware variant"
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="write the SA-BPE tokenizer folder + history.csv here"
    )
    add_force_argument(p)
    add_robustness_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_executor_arguments(p)


def _default_base() -> str:
    local = shared_assets() / "tokenizers" / "gpt2"
    return str(local) if local.is_dir() else "openai-community/gpt2"


def _default_heldout(corpus: list[str]) -> list[Path]:
    """heldout/ next to each local corpus folder (or next to the files a local glob names)."""
    out: list[Path] = []
    for c in corpus:
        p = Path(c)
        folder = p if p.is_dir() else p.parent if any(ch in c for ch in "*?[") or p.is_file() else None
        if folder is not None and (folder / "heldout").is_dir() and folder not in out:
            out.append(folder)
    return out


def _corpus_records(corpus: list[str], langs: list[str] | None, kw: dict) -> list[CodeRecord]:
    """The training records, read in this process (the parity-aware trainer needs the text itself)."""
    shards = resolve(corpus, layout="code")
    if langs:
        shards = [s for s in shards if s.group in set(langs)]
    return [r for s in shards for r in iter_records(s, **kw)]


def run(args: argparse.Namespace) -> int:
    """Count words (corpus executor), train, evaluate and (with --out) export."""
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the work, not after it
    priority = normalize_priority(args.priority)
    skip = SkipRule(min_repos=args.min_sources, min_languages=args.min_languages, max_share=args.max_share)
    cfg = executor_from_args(args)
    base = load(args.base or _default_base())
    langs = [x.strip() for x in args.languages.split(",") if x.strip()] if args.languages else None
    corpus = [str(c) for c in args.corpus] or [str(code_dir())]
    kw = {"max_files_per_repo": args.max_files_per_repo, "max_bytes_per_repo": args.max_bytes_per_repo}
    progress = None if args.quiet or args.json else stderr_progress("sabpe words")
    counted = compute(base, "source-words", corpus, options={"languages": langs, **kw}, executor=cfg,
                      progress=progress)  # fmt: skip
    if counted.result is None:
        print_json({"note": "submitted; rerun the same command to collect the counts", **counted.summary()})
        return 0
    sw = counted.result
    held_paths = args.heldout or _default_heldout(corpus)
    heldout = read_code(held_paths, languages=langs, heldout=not args.heldout, **kw) if held_paths else []
    runs = {}
    if not args.no_baseline and (priority != "F" or skip.active):
        runs["bpe"] = train(base, sw, args.vocab_size, priority="F", name="BPE")
    runs["sabpe"] = train(
        base, sw, args.vocab_size, priority=priority, skip=skip, name=f"SA-BPE [{priority}]"
    )
    cmp = SabpeComparison(corpus, sw, runs, heldout, counting=counted.summary())
    if args.parity:
        by_lang = records_by_language(_corpus_records(corpus, langs, kw))
        cmp.parity, secs = train_parity_baseline(base, by_lang, args.vocab_size, variant=args.parity_variant)
        cmp.parity_info = {"languages": list(by_lang), "variant": args.parity_variant, "seconds": secs,
                           "targets": "equal compression rate per language"}  # fmt: skip
    if not args.no_robustness:
        cmp.measure_robustness()
    sa = runs["sabpe"]
    if args.out:
        cmp.out = str(Path(args.out).resolve())
        rows = sa.history_records()
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["step"])
        w.writeheader()
        w.writerows(rows)
        write_folder(sa.tokenizer, args.out, cmp.to_json(), report_name="sabpe_report.json", replace=args.force,
                     extra={"history.csv": buf.getvalue().encode("utf-8")})  # fmt: skip
    if args.json:
        print_json(cmp.to_json())
        return 0
    _print(cmp)
    return 0


def _print(cmp: SabpeComparison) -> None:
    out = cmp.to_json()
    sa = cmp.runs["sabpe"]
    sys.stdout.write(
        f"{out['records']:,} records, {sa.n_repos} repositories, {sa.n_languages} languages, "
        f"{sa.word_types:,} word types\n"
    )
    metrics = cmp.metrics()
    for key, res in cmp.runs.items():
        line = f"{key:6s} {res.label}: {len(res.merges):,} merges, {res.n_skipped:,} skipped, {res.seconds['train']:.1f} s"
        if key in metrics:
            m = metrics[key]
            line += (
                f"; held-out bytes/token {m['bytes_per_token']:.4f}, single-repo tokens {m['single_repo_share']:.2%},"
                f" MTL {m['mean_token_length']:.2f}, token-frequency Gini {m['token_frequency_gini']:.3f},"
                f" per-language compression Gini {m.get('language_compression_gini', float('nan')):.4f},"
                f" 3-digit numbers {m['three_digit_numbers']}, STT unreachable {m['stt_unreachable']}"
            )
        sys.stdout.write(line + "\n")
    if "parity" in metrics:
        m = metrics["parity"]
        sys.stdout.write(
            f"parity Parity-aware BPE: held-out bytes/token {m['bytes_per_token']:.4f}, per-language compression "
            f"Gini {m.get('language_compression_gini', float('nan')):.4f}, 3-digit numbers {m['three_digit_numbers']}\n"
        )
    if cmp.robustness:
        sys.stdout.write("plain BPE → SA-BPE:\n")
        print_robustness(cmp.robustness)
    if cmp.out:
        sys.stdout.write(f"written to {cmp.out}\n")
