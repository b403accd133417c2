"""`python -m analysis drift A B [--langs …] [--content …] [--json]`: do two tokenizers (or two loadings of one)
cut the same text into the same ids? (:func:`analysis.measure.drift.drift`)"""

from __future__ import annotations

import argparse

from analysis.core.inputs import whole_number
from analysis.core.progress import stderr_progress
from analysis.measure.drift import CONTENT_CLASSES, DriftReport, DriftRow, drift
from analysis.tokenizer.sources import load

from ._common import print_json

NAME = "drift"
HELP = (
    "drift between two tokenizers or two loadings of one (tokenizer.json, vocab/merges, GGUF, tiktoken, "
    "SentencePiece): per FLORES language and content class, tokens of each and the share of identical ids"
)
_SOURCE = "folder, tokenizer.json, vocab.json+merges.txt folder, .gguf, .tiktoken, .model file or hub id"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `drift`."""
    p.add_argument("a", metavar="A", help=f"the first tokenizer ({_SOURCE})")
    p.add_argument("b", metavar="B", help="the second tokenizer (the same kinds of source)")
    p.add_argument("--revision-a", default=None, help="hub revision of A (branch, tag or commit)")
    p.add_argument(
        "--revision-b", default=None, help="hub revision of B (e.g. the same hub id, another revision)"
    )
    p.add_argument("--token", default=None, help="hub access token (gated or private repos)")
    p.add_argument("--langs", default="all",
                   help="FLORES codes, comma-separated, 'all' (default: the 204 languages) or 'none'")  # fmt: skip
    p.add_argument("--content", default=",".join(CONTENT_CLASSES),
                   help=f"content classes, comma-separated (default: {','.join(CONTENT_CLASSES)}; 'none')")  # fmt: skip
    p.add_argument("--show", type=whole_number(0, 10_000), default=10, metavar="N",
                   help="text output: the N languages with the fewest identical lines (default 10)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object (rows carry lang, tokens_a, tokens_b, identical)")  # fmt: skip


def _names(spec: str) -> list[str]:
    return [] if spec.strip().lower() == "none" else [s.strip() for s in spec.split(",") if s.strip()]


def _listed(items: list[str], n: int = 12) -> str:
    more = f" … ({len(items):,} in all; --json lists them)" if len(items) > n else ""
    return (", ".join(items[:n]) or "—") + more


def _row(r: DriftRow) -> str:
    ratio = f"{r.ratio:.4f}" if r.ratio is not None else "—"
    return f"{r.name:>12} {r.lines:>7,} {r.tokens_a:>12,} {r.tokens_b:>12,} {ratio:>8} {100 * r.identical:>9.2f}%"


def print_report(rep: DriftReport, show: int) -> None:
    """The text output: the verdict, the content classes, the languages that drift most, the pipeline."""
    print(f"A = {rep.a}\nB = {rep.b}")
    n = len(rep.languages)
    same = sum(r.identical_lines == r.lines for r in rep.languages)
    print(f"{same} of {n} languages identical on every line; "
          f"{'identical ids everywhere' if rep.identical_everywhere else 'the ids differ'} ({rep.seconds:.1f} s)")  # fmt: skip
    head = f"{'':>12} {'lines':>7} {'tokens A':>12} {'tokens B':>12} {'B / A':>8} {'identical':>10}"
    if rep.content:
        print("\ncontent class\n" + head)
        for r in rep.content:
            print(_row(r))
    worst = sorted(rep.languages, key=lambda r: (r.identical, r.name))[: max(show, 0)]
    if worst:
        print(f"\nlanguages (the {len(worst)} with the fewest identical lines)\n" + head)
        for r in worst:
            print(_row(r))
    firsts = [r for r in (*rep.content, *worst) if r.first_diff]
    for r in firsts[:3]:
        d = r.first_diff
        assert d is not None
        print(f"\nfirst differing line of {r.name} (line {d.index + 1}): {d.text[:120]!r}")
        print(f"  A: {' | '.join(d.tokens_a[:40])}")
        print(f"  B: {' | '.join(d.tokens_b[:40])}")
    print("\npipeline: " + ("no difference" if not rep.pipeline else ""))
    for p in rep.pipeline:
        print(f"  {p.part}:\n    A: {_listed(p.a)}\n    B: {_listed(p.b)}")
    for note in rep.notes:
        print(f"note: {note}")


def run(args: argparse.Namespace) -> int:
    """Load both tokenizers and print their drift."""
    a = load(args.a, revision=args.revision_a, token=args.token)
    b = load(args.b, revision=args.revision_b, token=args.token)
    langs = _names(args.langs) if args.langs.strip().lower() != "all" else "all"
    progress = None if args.quiet else stderr_progress("drift")
    rep = drift(a, b, langs, content=_names(args.content), progress=progress)
    if args.json:
        print_json(rep.to_json())
    else:
        print_report(rep, args.show)
    return 0
