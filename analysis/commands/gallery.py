"""`python -m analysis gallery [--json]`: compute (once) and print the example gallery."""

from __future__ import annotations

import argparse
import sys

from analysis.views.gallery import build_gallery, read_gallery

from ._common import print_json

NAME = "gallery"
HELP = (
    "precompute the example gallery (STT and 204-language compression of every example tokenizer, "
    "under-trained candidates of the fetched demo models)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `gallery`."""
    p.add_argument("--read-only", action="store_true", help="print what is stored; compute nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Build the missing entries (:func:`analysis.views.gallery.build_gallery`) and print the gallery."""
    if args.read_only:
        g = read_gallery()
    else:
        g = build_gallery(
            on_entry=lambda e: print(
                f"computed {getattr(e, 'name', None) or e.label} in {e.seconds:.1f} s", file=sys.stderr
            )
        )
    if args.json:
        print_json(g.to_json())
        return 0
    for e in sorted(g.entries, key=lambda e: -(e.summary.get("mean") or 0)):
        stt = f"{e.stt['unreachable']:,} unreachable" if e.stt else "no STT (not BPE)"
        print(f"{e.name:>24}: {e.vocab_size:>8,} tokens, bytes/token mean {e.summary['mean']:.3f} over "
              f"{e.languages} languages, Gini {e.summary['gini']:.3f}; {stt}")  # fmt: skip
    for m in g.models:
        top = ", ".join(repr(c["token"]) for c in m.candidates[:8])
        print(f"{m.label:>24}: {m.n_candidates:,} under-trained candidates of {m.n_rows:,} rows "
              f"({m.main} ≤ {m.threshold:.3g}, not verified); lowest: {top}")  # fmt: skip
    if g.missing or g.models_missing:
        print(f"not computed yet: {', '.join(g.missing + g.models_missing)}")
    return 0
