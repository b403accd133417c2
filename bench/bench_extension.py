"""Benchmark: continued BPE training vs the `tokenizers` BpeTrainer from scratch, peak memory, preview updates.

Two cases, each a new-token count N on one text:
* `flores-latin`: GPT-2 over the first 71 Latin-script FLORES-200 devtest files (sorted by name, ~10 MB);
* `mixed`: Llama-3.1 over >= 10 MB of text (Estonian + Finnish prose, UI strings and word lists, topped up
  with Python code from the shared corpora).

For each case, `--repeat` rounds, interleaved (the machine is shared: one round runs every job once, in a
fresh child process each, so the peak RSS is clean), medians reported:
* `continued`: :func:`continue_training` as a function call, word collection included;
* `bpetrainer`: the `tokenizers` BpeTrainer training N merges from scratch on the same text with the same
  normalizer / pre-tokenizer / byte alphabet (its word counting runs in Rust, on every core);
* `cli` (flores-latin): `python -m analysis extend --method continued --json` on the same files, its reported
  `seconds` (the end-to-end time: word counting, training, the output tokenizer) and the child's peak RSS.

Ratios and targets: continued / BpeTrainer <= 1.0x, CLI seconds / BpeTrainer <= 1.2x, peak RSS <= 1.2x. Then the
time the Extend page's preview needs to update after N changes (target <= 2 s per method).

Usage: `python bench/bench_extension.py [--case flores-latin|mixed|all] [--n 8000] [--repeat 3] [--no-preview]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.bpe.training import continue_training  # noqa: E402
from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.methods.extension import Preview, plan, train_auxiliary  # noqa: E402
from analysis.texts.corpora import Corpus, Source, corpus  # noqa: E402
from analysis.texts.flores import lines as flores_lines  # noqa: E402
from analysis.texts.flores import split_lines as flores_split  # noqa: E402


def bench_corpus(mb: float) -> Corpus:
    """>= mb MB of text: FLORES est training lines, the Estonian and Finnish corpora, then Python code."""
    c = assets_dir() / "corpora"
    srcs = [Source("flores-train", "est_Latn:800")]
    for name in (
        "est_Latn.txt.gz",
        "est_Latn.ui.txt.gz",
        "est_Latn.hunspell-words.txt.gz",
        "fin_Latn.txt.gz",
        "fin_Latn.ui.txt.gz",
    ):
        srcs.append(Source("file", str(c / "text" / name)))
    srcs.append(Source("file", str(c / "code" / "python.jsonl.gz")))
    return corpus(*srcs, max_chars=int(mb * 1_000_000))


#: The flores-latin case: this many Latin-script FLORES-200 devtest files, first by name.
LATIN_FILES = 71


def latin_files() -> list[Path]:
    """The first LATIN_FILES `*_Latn.devtest` files of the shared FLORES-200 devtest folder."""
    return sorted((assets_dir() / "flores200" / "devtest").glob("*_Latn.devtest"))[:LATIN_FILES]


def case_text(case: str, mb: float) -> list[str]:
    """The training text of a case (FLORES lines as the CLI reads the files: one unit per line)."""
    if case == "flores-latin":
        return list(corpus(*(Source("file", str(f)) for f in latin_files())))
    return list(bench_corpus(mb))


CASES = {
    "flores-latin": str(assets_dir() / "tokenizers" / "gpt2"),
    "mixed": str(assets_dir() / "tokenizers" / "llama-3.1"),
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def job(kind: str, tok_dir: str, n: int, mb: float, case: str = "mixed") -> dict:
    """One measured job (runs in a child process)."""
    tok = load(tok_dir)
    text = case_text(case, mb)
    nbytes = sum(len(u.encode("utf-8")) for u in text)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    if kind == "continued":
        res = continue_training(tok, text, n)
        info = {"new_tokens": res.n_new, "word_types": res.word_types, "phases": res.seconds}
    else:
        aux = train_auxiliary(tok, text, 256 + n)
        info = {"vocab": len(aux.tokens), "merges": len(aux.merges)}
    sec = time.perf_counter() - t0
    return {
        "kind": kind,
        "seconds": sec,
        "bytes": nbytes,
        "chars": sum(map(len, text)),
        "units": len(text),
        "rss_before_mb": rss0,
        "peak_rss_mb": _rss_mb(),
        **info,
    }


def run_child(kind: str, args: argparse.Namespace, case: str) -> dict:
    """Run one job in a fresh Python process (clean peak-RSS measurement) and return its JSON."""
    cmd = [sys.executable, __file__, "--job", kind, "--case", case, "--tokenizer", CASES[case]]
    out = subprocess.run(
        [*cmd, "--n", str(args.n), "--mb", str(args.mb)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


#: `python -m analysis ARGS` that prints its own peak RSS on stderr when it exits.
_PEAK_WRAPPER = (
    "import atexit, resource, runpy, sys; "
    "atexit.register(lambda: sys.stderr.write("
    "'PEAK_RSS_KB %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)); "
    "sys.argv[0] = 'analysis'; runpy.run_module('analysis', run_name='__main__')"
)


def run_cli(case: str, n: int) -> dict:
    """`python -m analysis extend --json` on the case's files in a child process: its `seconds` and peak RSS."""
    files = [str(f) for f in latin_files()]
    with tempfile.TemporaryDirectory() as cache:  # a fresh cache: nothing computed before is reused
        env = {**os.environ, "TOKLAB_CACHE": cache, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        cmd = [sys.executable, "-c", _PEAK_WRAPPER, "extend", "--tokenizer", CASES[case]]
        cmd += ["--method", "continued", *(a for f in files for a in ("--text", f))]
        cmd += ["--n", str(n), "--no-heldout", "--json", "--quiet"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    rep = json.loads(out.stdout)
    peak = [ln for ln in out.stderr.splitlines() if ln.startswith("PEAK_RSS_KB ")]
    return {"kind": "cli", "seconds": rep["seconds"], "peak_rss_mb": int(peak[-1].split()[1]) / 1024}


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def bench_case(case: str, args: argparse.Namespace) -> dict:
    """Interleaved rounds of the case's jobs; prints medians, ratios and targets and returns them."""
    kinds = ["continued", "bpetrainer"]
    got: dict[str, list[dict]] = {k: [] for k in kinds + (["cli"] if case == "flores-latin" else [])}
    for _ in range(args.repeat):
        for k in kinds:
            got[k].append(run_child(k, args, case))
        if "cli" in got:
            got["cli"].append(run_cli(case, args.n))
    cont, scratch = got["continued"][-1], got["bpetrainer"][-1]
    print(
        f"\n== case {case}: {Path(CASES[case]).name}, {args.n} new tokens, {args.repeat} interleaved rounds"
    )
    print(f"text: {cont['bytes'] / 1e6:.2f} MB ({cont['chars']:,} chars, {cont['units']:,} units)")
    t_c, t_s = _median(got["continued"], "seconds"), _median(got["bpetrainer"], "seconds")
    print(
        f"continued training ({cont['new_tokens']} new tokens, {cont['word_types']:,} word types): median "
        f"{t_c:.2f} s {[round(r['seconds'], 2) for r in got['continued']]}  phases "
        f"{json.dumps({k: round(v, 2) for k, v in cont['phases'].items()})}"
    )
    print(
        f"tokenizers BpeTrainer from scratch ({scratch['merges']} merges): median {t_s:.2f} s "
        f"{[round(r['seconds'], 2) for r in got['bpetrainer']]}"
    )
    ratio = t_c / t_s
    print(
        f"ratio continued / BpeTrainer (function): {ratio:.2f}x (target <= 1.0x) {'OK' if ratio <= 1 else 'MISSED'}"
    )
    m_c, m_s = _median(got["continued"], "peak_rss_mb"), _median(got["bpetrainer"], "peak_rss_mb")
    for name, rows in (("continued", got["continued"]), ("bpetrainer", got["bpetrainer"])):
        r = rows[-1]
        print(
            f"peak RSS {name}: median {_median(rows, 'peak_rss_mb'):.0f} MB (after loading tokenizer + text "
            f"{r['rss_before_mb']:.0f} MB)"
        )
    mr = m_c / m_s
    out = {"mb": round(cont["bytes"] / 1e6, 2), "word_types": cont["word_types"], "continued_s": round(t_c, 3),
           "bpetrainer_s": round(t_s, 3), "function_ratio": round(ratio, 3), "peak_rss_mb": round(m_c),
           "bpetrainer_peak_rss_mb": round(m_s), "peak_rss_ratio": round(mr, 3),
           "phases": {k: round(v, 2) for k, v in cont["phases"].items()}}  # fmt: skip
    print(
        f"ratio peak RSS continued / BpeTrainer: {mr:.2f}x (target <= 1.2x) {'OK' if mr <= 1.2 else 'MISSED'}"
    )
    if "cli" in got:
        t_e = _median(got["cli"], "seconds")
        e = t_e / t_s
        print(f"extend --json seconds: median {t_e:.2f} s {[round(r['seconds'], 2) for r in got['cli']]}")
        print(
            f"ratio extend (end to end) / BpeTrainer: {e:.2f}x (target <= 1.2x) {'OK' if e <= 1.2 else 'MISSED'}"
        )
        m_e = _median(got["cli"], "peak_rss_mb")
        print(f"peak RSS extend CLI: median {m_e:.0f} MB ({m_e / m_s:.2f}x BpeTrainer's)")
        out |= {
            "extend_json_s": round(t_e, 3),
            "end_to_end_ratio": round(e, 3),
            "extend_peak_rss_mb": round(m_e),
        }
    return out


def preview_bench(tok_dir: str, n_max: int) -> list[tuple[str, int, float]]:
    """Seconds per preview update (continued and regen) after N changes, plans trained once beforehand."""
    tok = load(tok_dir)
    est = Source("file", str(assets_dir() / "corpora" / "text" / "est_Latn.txt.gz"))
    text = list(corpus(Source("flores-train", "est_Latn:800"), est))
    _, held = flores_split("est_Latn")
    plans = {"continued": plan(tok, "continued", text, n_max)}
    plans["regen"] = plan(tok, "regen", text, n_max)
    pv = Preview(
        tok,
        plans,
        {"est_Latn held-out": held, "eng_Latn": flores_lines("eng_Latn")},
        target="est_Latn held-out",
        english="eng_Latn",
    )
    for m in plans:  # first view (builds the simulator, caches); not an N change
        pv.at(m, n_max)
    out = []
    for n in (n_max // 2, n_max // 4, n_max - 1, 1000):
        for m in plans:
            t0 = time.perf_counter()
            pv.at(m, n)
            out.append((m, n, time.perf_counter() - t0))
    return out


def main() -> int:
    """Run every measurement and print the numbers with their targets."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", choices=[*CASES, "all"], default="all")
    ap.add_argument("--tokenizer", default=None, help="(child jobs) the tokenizer folder")
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--mb", type=float, default=10.5)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds (medians reported)")
    ap.add_argument("--no-preview", action="store_true", help="skip the Extend preview timing")
    ap.add_argument("--job", default=None)
    args = ap.parse_args()
    if args.job:
        print(json.dumps(job(args.job, args.tokenizer, args.n, args.mb, args.case)))
        return 0
    run = Run(__file__, variant=variant_from(ap, args, ignore=("tokenizer",)))
    load1, load5, _ = os.getloadavg()
    print(
        f"{args.n} new tokens, {os.cpu_count()} CPU cores, load average {load1:.2f} (1 min) {load5:.2f} (5 min)"
    )
    figures: dict = {"new_tokens": args.n, "rounds": args.repeat}
    for case in CASES if args.case == "all" else [args.case]:
        figures[case] = bench_case(case, args)
    targets = {"function_ratio": "<= 1.0", "end_to_end_ratio": "<= 1.2", "peak_rss_ratio": "<= 1.2",
               "preview_update_worst_s": "<= 2"}  # fmt: skip
    met = all(c["function_ratio"] <= 1.0 and c["peak_rss_ratio"] <= 1.2 and c.get("end_to_end_ratio", 0) <= 1.2
              for k, c in figures.items() if isinstance(c, dict))  # fmt: skip
    if args.no_preview:
        run.write(figures, targets=targets, met=met)
        return 0
    times = preview_bench(CASES["mixed"], min(args.n, 4000))
    for m, n, s in times:
        print(f"preview update {m:>9} N -> {n:>5}: {s:.2f} s")
    worst = max(s for _, _, s in times)
    print(
        f"preview update worst: {worst:.2f} s (target <= 2 s per method) {'OK' if worst <= 2 else 'MISSED'}"
    )
    figures["preview_updates"] = [{"method": m, "n": n, "seconds": round(s, 3)} for m, n, s in times]
    figures["preview_update_worst_s"] = round(worst, 3)
    run.write(figures, targets=targets, met=met and worst <= 2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
