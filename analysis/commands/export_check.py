"""`python -m analysis export-check PATH [--json]`: pre-flight checks, llama.cpp parity and the round trip of an
exported folder or a GGUF file (:func:`analysis.evaluate.export_check.check_export`)."""

from __future__ import annotations

import argparse

from analysis.core.inputs import whole_number
from analysis.core.progress import stderr_progress
from analysis.tokenizer.sources import load
from analysis.views.export_check import run_export_check

from ._common import flores_langs, print_json

NAME = "export-check"
HELP = (
    "check an exported folder or GGUF file: pre-flight checks, parity with llama.cpp, round trip before/after"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `export-check`."""
    p.add_argument(
        "path", help="an export folder (tokenizer files, maybe weights and a .gguf) or a .gguf file"
    )
    p.add_argument(
        "--base", default=None, help="the original tokenizer (round trip before/after; GGUF pre-tokenizer)"
    )
    p.add_argument("--original-model", default=None, help="the model the export came from (unchanged rows)")
    p.add_argument("--langs", default=None, help="comma-separated FLORES codes (default: all 204)")
    p.add_argument(
        "--max-lines",
        type=whole_number(1),
        default=None,
        help="held-out lines per language (default: all 212)",
    )
    p.add_argument("--no-parity", action="store_true", help="skip the llama.cpp parity part")
    p.add_argument(
        "--fix",
        action="store_true",
        help="write the accepted form where a check can fix it (unused embedding rows: masked in "
        "generation_config.json suppress_tokens)",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="do not run the exported model on held-out text (the padding rows' largest probability)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the report as one JSON document (the page's download)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the export check and print its report (its verdict is the report's ``ok``); exit status 0 whenever the
    check ran, 2 on bad input."""
    base = load(args.base) if args.base else None
    langs = flores_langs(args.langs)
    rep = run_export_check(
        args.path,
        base=base,
        original_model=args.original_model,
        langs=langs,
        max_lines=args.max_lines,
        parity=not args.no_parity,
        fix=args.fix,
        probe_model=not args.no_probe,
        progress=None if args.json else stderr_progress("export-check"),
    )
    doc = rep.to_json()
    if args.json:
        print_json(doc)
        return 0
    print(f"{doc['path']} ({doc['kind']}): {'ok' if doc['ok'] else 'NOT ok'}")
    for c in doc["checks"]:
        print(f"  [{c['status']:>5}] {c['name']}: {c['detail']}")
    spec = doc["speculative"]
    if spec is not None:
        verdict = "compatible" if spec["compatible"] else "NOT compatible"
        print(f"  speculative decoding with the base (llama.cpp's rules): {verdict}: {spec['reason']}")
    if doc["roundtrip"] is not None:
        rt = doc["roundtrip"]
        roles = ", ".join(f"{n} {r}" for r, n in rt["by_role"].items())
        print(
            f"  round trip: {rt['broken']} of {rt['languages']} languages broken by the edit"
            + (f" ({roles})" if roles else "")
        )
        if rt["note"]:
            print(f"    {rt['note']}")
        if rt["unexpected"]:
            print(f"    not the method's price: {', '.join(rt['unexpected'])}")
        for e in rt["entries"][:10]:
            role = f" [{e['role']}]" if "role" in e else ""
            print(f"    {e['lang']}{role}: {e['text'][:60]!r} → {e['decoded'][:60]!r}")
    par = doc["parity"]
    if par is not None:
        if par["blocked"]:
            print(f"  parity with llama.cpp: blocked ({par['blocked']})")
        else:
            for kind, t in par["totals"].items():
                print(
                    f"  parity {kind:>7}: {t['identical']}/{t['lines']} identical ({100 * t['share']:.2f} %), "
                    f"{t['explained']} explained as llama.cpp's own, {t['unexplained']} unexplained"
                )
            reasons = {e["reason"] for e in par["languages"] if e["reason"]}
            for r in sorted(reasons):
                print(f"    explained: {r}")
            for e in par["languages"]:
                if e["unexplained"]:
                    print(
                        f"    {e['lang']} ({e['kind']}): {e['unexplained']} unexplained; {e['first_diff']['text'][:60]!r}"
                    )
    return 0
