"""`python -m analysis extend`: extend a tokenizer with N new tokens learned from text, and export it (and the
model, with `--model`).

Training text: files, folders, globs (quote them: ``'DIR/*.devtest'``), ``hf://`` paths, ``.zip`` archives and
FLORES training lines. Continued training counts its words with the corpus executor
(:mod:`analysis.jobs`: in this process for small inputs, on local cores, Slurm or Ray) and learns the
merges here; the same text gives the same merges on every executor. `--flores`, `--max-chars` and ``.zip``
archives are read in this process.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path

from analysis.adapt.embeddings import INIT_HELP, INITS
from analysis.bpe.parity import VARIANTS
from analysis.bpe.training import training_mode
from analysis.core.inputs import whole_number
from analysis.core.outputs import check_output_folder
from analysis.core.progress import stderr_progress
from analysis.errors import DataError
from analysis.jobs import add_executor_arguments, compute, executor_from_args, train_from_words
from analysis.measure.robustness import robustness_delta
from analysis.methods.extension import (
    DEFAULT_INIT,
    DEFAULT_METHOD,
    DEFAULT_MIN_FREQUENCY,
    METHODS,
    PARITY_CONTINUED,
    ExtendResult,
    compare_parity,
    export_extension,
    heldout_label,
    parity_text,
    plan,
)
from analysis.texts.corpora import Source, from_paths, iter_file, with_budget
from analysis.texts.flores import FLORES_TRAIN_LINES
from analysis.texts.shards import Shard, iter_units, resolve

from ._common import (
    add_force_argument,
    add_robustness_argument,
    add_tokenizer_argument,
    load_from_args,
    print_json,
    print_robustness,
)
from ._gguf import add_gguf_arguments, check_gguf_arguments, write_gguf_from_args

NAME = "extend"
HELP = (
    "extend a tokenizer: continued BPE training or a naive baseline; writes a Hugging Face folder (+ model)"
)
#: New tokens trained when only --min-frequency bounds the run.
N_CAP = 64_000
#: Share of the user's own text held out by default (its last units), and the most units held out.
HELDOUT_SHARE = 0.1
HELDOUT_MAX_UNITS = 2_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `extend`."""
    add_tokenizer_argument(p, "--tokenizer")
    p.add_argument(
        "--method",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help=f"extension method (default {DEFAULT_METHOD})",
    )
    p.add_argument(
        "--text",
        "--corpus",
        dest="text",
        action="append",
        default=[],
        metavar="PATH",
        help="training text: file (.txt/.jsonl/.parquet, optionally .gz), folder, glob (quote it: 'DIR/*.devtest'), "
        "hf://datasets/… path or a .zip; repeatable",
    )
    p.add_argument(
        "--flores",
        action="append",
        default=[],
        metavar="LANG",
        help=f"also train on the first {FLORES_TRAIN_LINES} FLORES-200 devtest lines of LANG (repeatable)",
    )
    p.add_argument(
        "--max-chars", type=whole_number(1), default=None, help="character budget of the training text"
    )
    p.add_argument(
        "--n",
        type=whole_number(1),
        default=None,
        help=f"number of new tokens (with --min-frequency alone: up to {N_CAP:,}, as many as reach it)",
    )
    p.add_argument(
        "--min-frequency",
        type=whole_number(0),
        default=DEFAULT_MIN_FREQUENCY,
        metavar="F",
        help="only tokens whose training pair frequency reaches F are added (Kim 2025's thresholds; default "
        f"{DEFAULT_MIN_FREQUENCY})",
    )
    p.add_argument(
        "--max-token-length", type=whole_number(1), default=None, help="longest new token, in characters"
    )
    p.add_argument(
        "--parity",
        action="store_true",
        help="naive methods: train the auxiliary tokenizer parity-aware (byte-level bases; one language per "
        "--flores LANG or per file stem, at least two) and compare it with the plain one",
    )
    p.add_argument("--parity-variant", choices=VARIANTS, default="base", help="parity-aware variant")
    p.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="FILE",
        help="held-out text for bytes/token before/after (repeatable; first one is the headline; default with "
        f"--text alone: the last {HELDOUT_SHARE:.0%} of the text's units, at most {HELDOUT_MAX_UNITS:,}, not trained on)",
    )
    p.add_argument(
        "--heldout-flores",
        action="append",
        default=[],
        metavar="LANG",
        help=f"held-out FLORES lines {FLORES_TRAIN_LINES + 1}–1012 of LANG (repeatable; default: every --flores "
        "training language, unless --heldout is given)",
    )
    p.add_argument(
        "--no-heldout", action="store_true", help="measure no held-out text (not even the default)"
    )
    add_robustness_argument(p)
    p.add_argument("--out", default=None, metavar="DIR", help="write the extended tokenizer folder here")
    p.add_argument(
        "--model",
        default=None,
        metavar="M",
        help="the base tokenizer's model (folder, .safetensors, .gguf, .bin or hub id): written to --out with "
        "embeddings and LM head grown to the new vocabulary",
    )
    p.add_argument(
        "--init",
        choices=INITS,
        default=DEFAULT_INIT,
        help="rows of the new tokens: " + "; ".join(f"{k} = {v}" for k, v in INIT_HELP.items()),
    )
    p.add_argument("--seed", type=whole_number(0), default=0, help="seed of the mvn/random initialisation")
    add_force_argument(p)
    add_gguf_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_executor_arguments(p)


# --------------------------------------------------------------------------------------------------
# Training text
# --------------------------------------------------------------------------------------------------
class TrainingText:
    """The training text of one run: FLORES lines, resolved corpus shards and ``.zip`` archives (read here)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.flores = [Source("flores-train", f"{lang}:{FLORES_TRAIN_LINES}") for lang in args.flores]
        zips = [t for t in args.text if str(t).lower().endswith(".zip")]
        self.zips = list(from_paths(zips).sources) if zips else []
        others = [t for t in args.text if t not in zips]
        self.shards: list[Shard] = resolve(others) if others else []
        self.inputs = others
        self.max_chars = args.max_chars
        #: units trained on when the rest is held out (:meth:`hold_out`); None: all of them
        self.train_units: int | None = None
        if not (self.flores or self.zips or self.shards):
            raise DataError("give training text with --text PATH (or --flores LANG)")

    @property
    def only_files(self) -> bool:
        """Whether the corpus executor can count it: files/globs/hf:// only, no budget, nothing held out."""
        return not self.flores and not self.zips and self.max_chars is None and self.train_units is None

    @property
    def size(self) -> int:
        """Bytes of the files (zips not counted)."""
        return sum(sh.size for sh in self.shards)

    def hold_out(self) -> HeldOutSplit | None:
        """Keep the last :data:`HELDOUT_SHARE` of the text units (at most :data:`HELDOUT_MAX_UNITS`) out of
        training, to measure on; None when the text has fewer than 10 units."""
        n = sum(1 for _ in self.units())
        k = min(HELDOUT_MAX_UNITS, int(n * HELDOUT_SHARE))
        if k < 1:
            return None
        held = list(islice(self.units(), n - k, n))
        self.train_units = n - k
        return HeldOutSplit(self.label, n, n - k + 1, held)

    @property
    def label(self) -> str:
        """A short description."""
        parts = [s.label for s in self.flores + self.zips]
        if self.shards:
            parts.append(f"{len(self.shards)} file(s): {', '.join(self.inputs)}")
        return "; ".join(parts)

    def units(self) -> Iterator[str]:
        """Every text unit (within the character budget), or the training part of them (:meth:`hold_out`)."""
        it = chain(
            (u for s in self.flores + self.zips for u in s.units()),
            (u for sh in self.shards for u in iter_units(sh)),
        )
        return with_budget(it, self.max_chars)

    def training_units(self) -> Iterator[str]:
        """The units trained on: all of them, or those before the held-out part."""
        units = self.units()
        return units if self.train_units is None else islice(units, self.train_units)

    def factory(self) -> Callable[[], Iterator[str]]:
        """A re-iterable view of the training units (each call reads the text again)."""
        return self.training_units

    def by_language(self) -> dict[str, list[str]]:
        """One corpus per language: a --flores LANG each, and the files grouped by stem (``est_Latn.devtest``)."""
        if self.zips:
            raise DataError(
                "parity-aware training needs one corpus per language: .zip archives cannot be split"
            )
        if self.max_chars is not None:
            raise DataError(
                "--max-chars does not apply to parity-aware training (every language is read whole)"
            )
        out: dict[str, list[str]] = {}
        for s in self.flores:
            out.setdefault(s.ref.split(":")[0], []).extend(s.units())
        for sh in self.shards:
            out.setdefault(sh.group, []).extend(iter_units(sh))
        return out


@dataclass
class HeldOutSplit:
    """The part of the user's own text held out of training by default: units `first`…`units` (1-based)."""

    source: str
    units: int
    first: int
    lines: list[str]

    @property
    def name(self) -> str:
        """The held-out text's name in the report (says which units)."""
        return f"your text, units {self.first:,}–{self.units:,} of {self.units:,} (held out)"

    def to_json(self) -> dict:
        """Which units were held out."""
        return {"source": self.source, "units": self.units, "first": self.first, "last": self.units,
                "held_out": len(self.lines), "share": len(self.lines) / self.units}  # fmt: skip


def _default_split(args: argparse.Namespace, text: TrainingText, cfg) -> HeldOutSplit | None:
    """Hold out the end of the user's own text when no held-out text is named (no --heldout, --heldout-flores,
    --no-heldout, --flores, --parity) and the text is read in this process (below the executor threshold)."""
    if not args.text or args.heldout or args.heldout_flores or args.no_heldout or args.flores or args.parity:
        return None
    if cfg.resolved_kind(text.size) != "inprocess":
        print(f"extend: no held-out text (the text is counted on the {cfg.resolved_kind(text.size)} executor); "
              "give --heldout FILE to measure bytes/token before/after", file=sys.stderr)  # fmt: skip
        return None
    return text.hold_out()


def _heldout(args: argparse.Namespace) -> dict[str, list[str]]:
    heldout: dict[str, list[str]] = {}
    for f in args.heldout:
        lines = list(iter_file(f))
        if not lines:
            raise DataError(f"held-out file {f} is empty")
        heldout[Path(f).name] = lines
    # by default, the held-out lines of every FLORES training language: the report is useful as documented
    langs = args.heldout_flores or ([] if args.heldout or args.no_heldout else args.flores)
    for lang in langs:
        heldout[heldout_label(lang)] = list(Source("flores-heldout", f"{lang}:{FLORES_TRAIN_LINES}").units())
    return heldout


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------
def _check(args: argparse.Namespace) -> int:
    if args.model and not args.out:
        raise DataError("--model needs --out (the folder the model is written to)")
    if args.min_frequency < 0:
        raise DataError("--min-frequency must be ≥ 0")
    if args.n is None and not args.min_frequency:
        raise DataError("give --n (the number of new tokens) or --min-frequency")
    if args.parity and args.method == "continued":
        raise DataError(PARITY_CONTINUED)
    return args.n if args.n is not None else N_CAP


def _continued(args, tok, text: TrainingText, n: int, cfg, progress):
    """Continued training: words from the corpus executor (or in this process), merges here."""
    if text.only_files:
        options = {"n_new": n} if training_mode(tok) == "sentencepiece" else {}
        run_ = compute(tok, "words", text.inputs, options=options, executor=cfg, progress=progress)
        if run_.result is None:
            return None, run_.summary()
        tr = train_from_words(tok, run_.result, n, max_token_length=args.max_token_length,
                              min_frequency=args.min_frequency)  # fmt: skip
        p = plan(tok, "continued", [], n, training=tr, min_frequency=args.min_frequency)
        return p, run_.summary()
    if cfg.kind not in ("auto", "inprocess"):
        raise DataError(
            "--flores, --max-chars and .zip archives are read in this process: give files, folders, globs or "
            "hf:// paths with --text to count on another executor"
        )
    p = plan(tok, "continued", text.factory(), n, max_token_length=args.max_token_length,
             min_frequency=args.min_frequency)  # fmt: skip
    return p, {"executor": "inprocess", "reader": "in this process"}


def run(args: argparse.Namespace) -> int:
    """Train, extend, measure and (with --out) export, with the model when --model is given."""
    n = _check(args)
    check_gguf_arguments(args)
    if args.out:
        check_output_folder(args.out, replace=args.force)  # before the work, not after it
    tok = load_from_args(args)
    cfg = executor_from_args(args)
    text = TrainingText(args)
    heldout = _heldout(args)
    split = _default_split(args, text, cfg)
    if split is not None:
        heldout[split.name] = split.lines
    progress = None if args.quiet or args.json else stderr_progress("extend")
    t0 = time.perf_counter()
    corpus_info = parity_info = None
    if args.method == "continued":
        p, corpus_info = _continued(args, tok, text, n, cfg, progress)
        if p is None:
            print_json({"note": "submitted; rerun the same command to collect the counts", **corpus_info})
            return 0
    elif args.parity:
        pt = parity_text(text.by_language(), args.parity_variant)
        parity_info, p = compare_parity(tok, args.method, n, pt, min_frequency=args.min_frequency,
                                        max_token_length=args.max_token_length)  # fmt: skip
    else:
        p = plan(tok, args.method, text.factory(), n, max_token_length=args.max_token_length,
                 min_frequency=args.min_frequency)  # fmt: skip
    ext = p.apply(n)
    seconds = time.perf_counter() - t0
    res = ExtendResult(ext, n_requested=n, text=text.label, seconds=seconds, heldout=heldout,
                       text_chars=p.training.chars if p.training is not None else None, training=p.training,
                       aux=p.aux, min_frequency=args.min_frequency, corpus=corpus_info, parity=parity_info)  # fmt: skip
    if heldout and not args.no_robustness:
        res.robustness = robustness_delta(tok, ext.tokenizer, {_lang_of(k): v for k, v in heldout.items()})
    if args.out:
        export_extension(res, args.out, model=args.model, init=args.init, seed=args.seed, replace=args.force)
    gguf = write_gguf_from_args(args, ext.tokenizer, tok)
    held = {"heldout_split": split.to_json()} if split is not None else {}
    if args.json:
        print_json({**res.to_json(), **held, **({"gguf": gguf} if gguf else {})})
        return 0
    _print(res)
    if split is not None:
        print(f"  held out of training: the last {len(split.lines):,} of {split.units:,} units of your text "
              f"({split.first:,}–{split.units:,}); --heldout FILE measures another text instead")  # fmt: skip
    if gguf:
        print(f"  GGUF: {gguf['file']} ({gguf['source']}, {gguf['bytes']:,} bytes)")
    return 0


def _lang_of(heldout_name: str) -> str:
    """A held-out text's language for the robustness rows: the FLORES code of `LANG (FLORES held-out)`, else the
    file name."""
    return heldout_name.removesuffix(" (FLORES held-out)")


def _print(res: ExtendResult) -> None:
    rep = res.to_json()
    w = sys.stdout.write
    w(f"{rep['method_label']} on {rep['base']}: added {rep['added']} tokens ({rep['merges_added']} merges), "
      f"{rep['unreachable_added']} STT-unreachable, {rep['seconds']:.1f} s\n")  # fmt: skip
    for name, h in rep.get("heldout", {}).items():
        w(f"  {name}: bytes/token {h['bytes_per_token_before']:.4f} → {h['bytes_per_token_after']:.4f} "
          f"({h['delta_rel']:+.2%}); characters per 2,048 tokens {h['chars_per_2048_before']:,.0f} → "
          f"{h['chars_per_2048_after']:,.0f}\n")  # fmt: skip
    print_robustness(rep.get("robustness"))
    par = rep.get("parity")
    if par and "difference" in par:
        a, b = par["plain"]["summary"], par["parity"]["summary"]
        w(f"  parity-aware vs plain auxiliary ({', '.join(par['measured_languages'])}): premium mean "
          f"{a['premium_mean']:.3f} → {b['premium_mean']:.3f}, Gini {a['premium_gini']:.4f} → "
          f"{b['premium_gini']:.4f}, bytes/token {a['bytes_per_token']:.4f} → {b['bytes_per_token']:.4f}\n")  # fmt: skip
    if "model" in rep:
        m = rep["model"]
        w(f"  model: {m['old_rows']:,} → {m['new_rows']:,} embedding rows ({m['init']}, tied {m['tied']})\n")
    if "out" in rep:
        w(f"  written to {rep['out']}\n")
