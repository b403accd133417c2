"""`python -m analysis model-check`: the edited model measured against the original per language: bits per byte
before/after on the same held-out FLORES bytes, tokens per byte, the mass on new ids (Hewitt 2021), the KL on
unchanged spans, the mass on removed ids, each new token's use; optionally an initialisation bake-off
(``--inits``) and a warm-up of the new rows only (``--warmup-steps``, ``--objective ntp|distill``)."""

from __future__ import annotations

import argparse
import sys

from analysis.adapt.embeddings import INITS
from analysis.adapt.transplant import is_transplant_folder
from analysis.adapt.transplant import read_for_model_check as read_transplant
from analysis.adapt.warmup import OBJECTIVES, WarmupConfig, warm_up
from analysis.core.inputs import real_number, whole_number
from analysis.core.outputs import check_output_folder
from analysis.core.progress import report, scaled, stderr_progress
from analysis.errors import DataError
from analysis.evaluate.flags import MASS_LIMIT
from analysis.evaluate.model_check import (
    DEFAULT_LANGS,
    HELDOUT_LINES,
    heldout_texts,
    load_pair,
    model_check,
    training_texts,
)
from analysis.methods.reuse.model import is_reuse_folder, read_for_model_check
from analysis.methods.undertrained import indicators_for
from analysis.model.bpb import STRIDE, WINDOW
from analysis.model.models import parse_max_memory

from ._common import add_force_argument, flores_langs, print_json

NAME = "model-check"
HELP = "measure an edited model against the original: bits per byte per language, new rows, inits, warm-up"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `model-check`."""
    p.add_argument(
        "--original",
        required=True,
        metavar="MODEL",
        help="the original model: folder, .gguf/.safetensors file or hub id",
    )
    p.add_argument(
        "--edited",
        required=True,
        metavar="DIR",
        help="an edit's --out folder written with its model (extend, prune, or reuse --model: an R-BPE folder)",
    )
    p.add_argument(
        "--langs",
        default=",".join(DEFAULT_LANGS),
        help=f"comma-separated FLORES codes, or all (every FLORES language; default {','.join(DEFAULT_LANGS)})",
    )
    p.add_argument(
        "--lines",
        type=whole_number(1),
        default=None,
        metavar="N",
        help=f"held-out lines per language (the first N of the {HELDOUT_LINES}; default all)",
    )
    p.add_argument(
        "--inits", default="", help=f"bake-off: comma-separated inits of the new rows ({', '.join(INITS)})"
    )
    p.add_argument(
        "--seed", type=whole_number(0), default=0, help="seed of the mvn/random inits and the warm-up"
    )
    p.add_argument(
        "--warmup-steps",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="train only the new rows for N steps",
    )
    p.add_argument(
        "--train-langs",
        default=None,
        metavar="LANGS",
        help="warm-up text: the FLORES training lines (1–800) of these languages (default: the first of --langs, "
        "the edit's target)",
    )
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="ntp",
        help="warm-up objective: ntp = next-token loss; distill = hidden-state distillation against the "
        "original multi-token split (Dobler, Elliott & de Melo 2026)",
    )
    p.add_argument(
        "--warmup-tokens",
        type=whole_number(8),
        default=1024,
        metavar="T",
        help="tokens per warm-up step (default 1024)",
    )
    p.add_argument(
        "--warmup-lr",
        type=real_number(0, open_low=True),
        default=1e-3,
        help="learning rate of the warm-up (default 1e-3)",
    )
    p.add_argument(
        "--eval-every",
        type=whole_number(0),
        default=0,
        metavar="K",
        help="measure bits per byte every K warm-up steps (default: 4 points along the run)",
    )
    p.add_argument("--out", default=None, metavar="DIR", help="write the warmed model (+ tokenizer) here")
    add_force_argument(p)
    p.add_argument(
        "--window",
        type=whole_number(1),
        default=WINDOW,
        help=f"tokens per window for long lines (default {WINDOW})",
    )
    p.add_argument(
        "--stride",
        type=whole_number(1),
        default=STRIDE,
        help=f"stride of the sliding window (default {STRIDE})",
    )
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--max-memory", default=None, metavar="SPEC",
                   help="memory cap, e.g. cpu=8GiB or 0=20GiB: refuse models that need more")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines (named stages) on stderr")


def _check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    langs = flores_langs(args.langs)
    inits = [x.strip() for x in args.inits.split(",") if x.strip()]
    bad = [i for i in inits if i not in INITS]
    if bad:
        raise DataError(f"unknown init {bad[0]!r}; choose from {', '.join(INITS)}")
    if args.out and not args.warmup_steps:
        raise DataError("--out writes the warmed model: give --warmup-steps N")
    if not 0 < args.warmup_lr < 1:
        raise DataError("--warmup-lr must be between 0 and 1")
    return langs, inits


def run(args: argparse.Namespace) -> int:
    """Check inputs, load both models, measure (bake-off, warm-up), print text or JSON."""
    langs, inits = _check(args)
    train_langs = flores_langs(args.train_langs or langs[0], "--train-langs")
    if args.out:
        check_output_folder(args.out, replace=args.force)
    texts = heldout_texts(langs, args.lines)
    max_memory = parse_max_memory(args.max_memory)
    progress = None if args.quiet else stderr_progress("model-check")  # stderr: --json keeps stdout clean
    if args.quiet:  # transformers' own "Loading weights" bars too
        from transformers.utils import logging as hf_logging  # noqa: PLC0415 - heavy, loaded with the models

        hf_logging.disable_progress_bar()
    reader = None
    if is_reuse_folder(args.edited):  # an R-BPE model folder
        reader = read_for_model_check
    elif is_transplant_folder(args.edited):  # ids follow the transplant's map, not token strings
        reader = read_transplant
    original, edited = load_pair(args.original, args.edited, device=args.device, max_memory=max_memory,
                                 reader=reader, progress=scaled(progress, 0.0, 0.05))  # fmt: skip
    report(progress, 0.05, 1.0, "measuring bits per byte on the held-out lines")
    res = model_check(original, edited, texts, inits=inits, seed=args.seed, window=args.window,
                      stride=args.stride, progress=scaled(progress, 0.05, 0.3 if args.warmup_steps else 1.0))  # fmt: skip
    res.indicators = indicators_for(args.edited, edited.tok, [u.id for u in res.new_tokens])
    if args.warmup_steps:
        cfg = WarmupConfig(steps=args.warmup_steps, objective=args.objective, tokens_per_step=args.warmup_tokens,
                           lr=args.warmup_lr, eval_every=args.eval_every, seed=args.seed)  # fmt: skip
        wu = warm_up(original, edited, training_texts(train_langs), texts, cfg, window=args.window, stride=args.stride,
                     progress=scaled(progress, 0.3, 1.0), out=args.out, replace=args.force)  # fmt: skip
        res.warmup = wu.to_json()
        res.out = wu.out
    if args.json:
        print_json(res.to_json())
        return 0
    _print(res.to_json())
    return 0


def _print(doc: dict) -> None:
    w = sys.stdout.write
    p = doc["prefix"]
    w(f"{doc['edited']} vs {doc['original']} on {doc['device']}: {doc['n_new_tokens']} new, "
      f"{doc['n_removed_tokens']} removed tokens; prefix {p.get('token')!r} ({p.get('source')}); "
      f"{doc['seconds']:.1f} s\n")  # fmt: skip
    for c in doc["languages"]:
        extra = ""
        if c["mass_new_on_old_text"] is not None:
            extra += f", mass on new ids {c['mass_new_on_old_text']:.4f}"
        if c["kl_unchanged"] is not None:
            extra += f", KL unchanged {c['kl_unchanged']:.4f} nats ({c['unchanged_positions']:,} positions)"
        if c["mass_removed"] is not None:
            extra += f", mass on removed ids {c['mass_removed']:.4f}"
        w(f"  {c['lang']}: BPB {c['bpb_original']:.4f} → {c['bpb_edited']:.4f} ({c['delta_bpb']:+.4f}); tokens/byte "
          f"{c['tokens_per_byte_original']:.4f} → {c['tokens_per_byte_edited']:.4f}{extra}\n")  # fmt: skip
    b = doc.get("bakeoff")
    if b:
        for row in b["languages"]:
            w(f"  bake-off {row['lang']}:\n")
            for name, c in row["inits"].items():
                mass = c["mass_new_on_old_text"]
                kl = c["kl_unchanged"]
                w(f"    {name:>8}: BPB {c['bpb_edited']:.4f}, mass on new ids "
                  f"{'–' if mass is None else f'{mass:.4f}'}, KL {'–' if kl is None else f'{kl:.4f}'}\n")  # fmt: skip
    flagged = [u for u in doc["new_tokens"] if (u.get("undertrained") or {}).get("candidate")]
    never = sum(1 for u in doc["new_tokens"] if u["argmax_count"] == 0)
    w(f"  new tokens: {never} of {len(doc['new_tokens'])} never the argmax on this text; {len(flagged)} flagged "
      "under-trained by the embedding indicator\n")  # fmt: skip
    rows, langs = doc.get("flagged_new_rows", []), doc.get("flagged_languages", [])
    w(f"  unusual mass ({doc['flag_rule']['rows']}): "
      f"{len(rows)} new row{'' if len(rows) == 1 else 's'} flagged{':' if rows else ''}\n")  # fmt: skip
    for r in rows[:20]:
        w(f"    {r['id']} {r['token']!r}: argmax {r['argmax_count']:,}× where another token is next, occurs "
          f"{r['occurrences']:,}×, max p {r['misplaced_max_prob']:.3f}\n")  # fmt: skip
    if len(rows) > 20:
        w(f"    … {len(rows) - 20} more (--json lists all)\n")
    for c in langs:
        w(f"  flagged {c['lang']}: mass on new ids {c['mass_new_on_old_text']:.4f} reading the old tokenization "
          f"(> {MASS_LIMIT}: {c['kl_nats']:.3f} nats per token)\n")  # fmt: skip
    if b:
        w("  flagged rows per init: " + ", ".join(f"{i} {n}" for i, n in b["flagged"].items()) + "\n")
    wu = doc.get("warmup")
    if wu:
        w(f"  warm-up ({wu['objective']}, {wu['steps_done']} steps, {wu['seconds']:.0f} s):\n")
        for pt in wu["curve"]:
            w(
                f"    step {pt['step']:>5}: "
                + ", ".join(f"{lang} {v:.4f}" for lang, v in pt["bpb"].items())
                + "\n"
            )
    if doc.get("out"):
        w(f"  written to {doc['out']}\n")
