"""`python -m analysis reuse`: R-BPE token reuse — retrain reusable ids for a target script, measure, export."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from analysis.core.inputs import whole_number
from analysis.core.outputs import atomic_folder, check_output_folder
from analysis.errors import DataError
from analysis.methods.reuse import (
    DEFAULT_RULES,
    PROTECTIONS,
    RULES,
    TRAINERS,
    build_reuse_tokenizer,
    target_training_texts,
)
from analysis.methods.reuse.defaults import (
    DEFAULT_MAX_WORDS,
    DEFAULT_MIN_FREQUENCY,
    DEFAULT_MIN_REUSABLE,
    DEFAULT_PRESERVED,
    DEFAULT_TARGET,
    DEFAULT_TRAINER,
    SAFE_PROTECT,
    TARGET_LANGS,
    target_lang,
)
from analysis.methods.reuse.measures import SPLITS, ReuseReport, measure_reuse
from analysis.methods.reuse.model import export_model
from analysis.texts.corpora import iter_file
from analysis.texts.flores import FLORES_TRAIN_LINES

from ._common import (
    add_force_argument,
    add_robustness_argument,
    add_tokenizer_argument,
    load_from_args,
    print_json,
    print_robustness,
)
from ._gguf import add_gguf_arguments, check_gguf_arguments, write_gguf_from_args

NAME = "reuse"
HELP = (
    "R-BPE token reuse: map a new target-language BPE onto ids of unused scripts (vocabulary size unchanged)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `reuse`."""
    add_tokenizer_argument(p)
    p.add_argument("--target", default=DEFAULT_TARGET, help=f"target script (default {DEFAULT_TARGET})")
    p.add_argument(
        "--preserve",
        default=",".join(DEFAULT_PRESERVED),
        help=f"comma-separated scripts whose tokens are kept (default {','.join(DEFAULT_PRESERVED)})",
    )
    p.add_argument(
        "--min-reusable",
        type=whole_number(0),
        default=DEFAULT_MIN_REUSABLE,
        help=f"threshold h on reusable ids (default {DEFAULT_MIN_REUSABLE})",
    )
    p.add_argument(
        "--rules",
        choices=RULES,
        default=DEFAULT_RULES,
        help="class rules: 'paper' (the R-BPE code the paper used: 122 blocks, 26 script keywords) or "
        "'unicode17' (every Unicode 17 block and script); default paper",
    )
    p.add_argument(
        "--protect",
        default=",".join(SAFE_PROTECT),
        help=f"comma-separated protections ({', '.join(PROTECTIONS)}): keep shared punctuation/symbols, and ids "
        f"the FLORES text of kept-script languages uses, out of reuse (default {','.join(SAFE_PROTECT)}, the "
        "safe setting, as on the page; '' for none)",
    )
    p.add_argument(
        "--paper-exact",
        action="store_true",
        help="the paper's exact setting: no protections (overrides --protect); shared punctuation of other "
        "scripts can then be reused (Odia and Gurmukhi lines gain target-script text on decoding)",
    )
    add_gguf_arguments(p)
    p.add_argument(
        "--train-lang",
        default=None,
        help=f"FLORES language for training (first {FLORES_TRAIN_LINES} lines) and held-out metrics (the rest); "
        "default the target's: " + ", ".join(f"{k} {v}" for k, v in TARGET_LANGS.items()),
    )
    p.add_argument(
        "--text", action="append", default=[], metavar="FILE", help="extra training text (repeatable)"
    )
    p.add_argument(
        "--no-flores", action="store_true", help="do not train on the FLORES lines of --train-lang"
    )
    p.add_argument(
        "--no-corpora",
        action="store_true",
        help="train without the shared corpora of --train-lang (FLORES + --text only: faster, weaker)",
    )
    p.add_argument(
        "--max-words",
        type=whole_number(1),
        default=DEFAULT_MAX_WORDS,
        help=f"most frequent words taken from the word-frequency list (default {DEFAULT_MAX_WORDS:,})",
    )
    p.add_argument(
        "--min-frequency",
        type=whole_number(0),
        default=DEFAULT_MIN_FREQUENCY,
        help=f"minimum pair frequency of the new BPE (default {DEFAULT_MIN_FREQUENCY})",
    )
    p.add_argument(
        "--trainer",
        choices=TRAINERS,
        default=DEFAULT_TRAINER,
        help="target tokenizer trainer: plain BPE, or parity-aware BPE over the FLORES languages of the target "
        "script (default bpe)",
    )
    p.add_argument(
        "--reference-lang", default="eng_Latn", help="FLORES language for premium/parity (default eng_Latn)"
    )
    p.add_argument(
        "--collateral",
        choices=(*SPLITS, "none"),
        default="heldout",
        help="the collateral table over every FLORES language on the held-out lines (default), all lines, or none",
    )
    p.add_argument("--out", default=None, metavar="DIR", help="write the R-BPE tokenizer folder here")
    p.add_argument(
        "--model",
        default=None,
        help="with --out: also write this model (folder, weight file, GGUF or hub id) with the reused ids' rows "
        "re-initialised by FVT",
    )
    add_force_argument(p)
    add_robustness_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _texts(args: argparse.Namespace) -> list[str]:
    extra: list[str] = []
    for f in args.text:
        if not Path(f).is_file():
            raise DataError(f"{f}: no such file")
        extra += list(iter_file(f))
    return target_training_texts(
        args.train_lang,
        flores_train=not args.no_flores,
        corpora=not args.no_corpora,
        max_words=args.max_words,
        extra=extra,
    )


def run(args: argparse.Namespace) -> int:
    """Build the R-BPE tokenizer, measure it on held-out FLORES (and every language), optionally save it."""
    args.train_lang = args.train_lang or target_lang(args.target)
    if args.model and not args.out:
        raise DataError("--model needs --out (the folder the model and tokenizer are written to)")
    check_gguf_arguments(args)
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the work, not after it
    tok = load_from_args(args)
    t0 = time.perf_counter()
    rt = build_reuse_tokenizer(
        tok,
        _texts(args),
        target=args.target,
        preserved=[s for s in args.preserve.split(",") if s.strip()],
        min_reusable=args.min_reusable,
        min_frequency=args.min_frequency,
        rules=args.rules,
        protect=[] if args.paper_exact else [s.strip() for s in args.protect.split(",") if s.strip()],
        trainer=args.trainer,
        train_lang=args.train_lang,
    )
    rep = measure_reuse(
        rt,
        args.train_lang,
        args.reference_lang or None,
        collateral_split=None if args.collateral == "none" else args.collateral,
        seconds=time.perf_counter() - t0,
    )
    if not args.no_robustness:
        rep.measure_robustness()
    if args.out and args.model:
        rep.model = export_model(rt, args.model, args.out, replace=args.force)
        rep.out = rep.model["out"]
    elif args.out:
        with atomic_folder(args.out, replace=args.force) as tmp:  # complete, or not there at all
            rt.save(tmp)
        rep.out = str(Path(args.out).resolve())
    # llama.cpp runs the base tokenizer: R-BPE's own encoder (two tokenizers and the id map) gives it the ids
    gguf = write_gguf_from_args(args, rt.old, tok)
    if gguf:
        gguf["note"] = ("the GGUF carries the base vocabulary: llama.cpp cannot run R-BPE's encoder, so "
                        "target-script text must be encoded with the exported R-BPE tokenizer and passed as ids")  # fmt: skip
    if args.json:
        print_json({**rep.to_json(), **({"gguf": gguf} if gguf else {})})
        return 0
    _print(rep, tok.name, args)
    if gguf:
        print(f"  GGUF: {gguf['file']} ({gguf['source']}, {gguf['bytes']:,} bytes); {gguf['note']}")
    return 0


def _print(report: ReuseReport, name: str, args: argparse.Namespace) -> None:
    rep, info = report.to_json(), report.rt.info
    h, b, a = rep["heldout"], rep["heldout"]["before"], rep["heldout"]["after"]
    sel = ", ".join(f"{k} ({v})" for k, v in info["selected_classes"].items())
    print(
        f"R-BPE on {name}: target {args.target}, preserved {', '.join(info['preserved'])}, rules {info['rules']}"
    )
    print(f"  {len(info['selected_classes'])} reusable classes: {sel}")
    print(
        f"  reusable ids {info['reusable_count']:,} ({info['protected_count']:,} protected); new vocabulary "
        f"{info['new_vocab_size']:,} ({info['common_tokens']:,} common, {info['reused_tokens']:,} on reused ids; "
        f"{info['trainer']}, min frequency {info['min_frequency']}); {rep['seconds']:.1f} s"
    )
    print(f"  {h['lang']} held-out ({h['lines']} lines), before → after:")
    for key, label in (
        ("fertility", "fertility"),
        ("bytes_per_token", "bytes/token"),
        ("continued_words", "continued words"),
        ("premium", f"premium vs {h['reference']}"),
    ):
        if b.get(key) is not None and a.get(key) is not None:
            print(f"    {label:24} {b[key]:.3f} → {a[key]:.3f} ({a[key] / b[key] - 1:+.1%})")
    demo = rep.get("reused_script_demo")
    if demo:
        print(f"  reused script now decodes as the target: {demo['text'][:50]!r} → {demo['decoded'][:50]!r}")
    s = rep.get("collateral_summary")
    if s:
        kept = ", ".join(s["kept_languages_broken"]) or "none"
        print(
            f"  collateral ({args.collateral} lines): {s['not_round_trip']} of {s['languages']} FLORES languages no "
            f"longer round-trip {s['not_round_trip_by_role']}; kept-script languages broken: {kept}"
        )
    print_robustness(rep.get("robustness"))
    if rep.get("model"):
        m = rep["model"]
        print(
            f"  model: {m['reinitialised']:,} of {m['rows']:,} rows re-initialised by FVT (tied {m['tied']})"
        )
    if rep.get("out"):
        print(f"  written to {rep['out']}")
