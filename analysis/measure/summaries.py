"""Compression rows across languages (Purason et al., "Teaching Old Tokenizers New Words", 2025): the Gini
coefficient, per-tokenizer summaries (:func:`summarize`), per script group (:func:`script_summary`, their Table 2),
Δrel and win rate between two tokenizers (:func:`compare`, their Table 1), the drill-down to the worst sentences
and languages, and a LaTeX table."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .corpus_counts import rust_tokenizer
from .metrics import HIGHER_IS_BETTER

#: Script groups of Purason et al., Table 2 (everything else is "Other").
TABLE2_GROUPS = ("Latn", "Cyrl", "Arab", "Jpan", "Hani")


def gini(values: Iterable[float]) -> float:
    """Gini coefficient of non-negative values (0 = all equal, → 1 = concentrated); NaN/None dropped."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if x.size == 0 or x.sum() == 0:
        return 0.0
    x = np.sort(x)
    n = x.size
    cum = np.cumsum(x)
    return float((n + 1 - 2 * (cum / cum[-1]).sum()) / n)


def _values(rows: Sequence[dict], tokenizer: str, metric: str) -> dict[str, float]:
    return {
        r.get("lang", r.get("corpus")): float(r[metric])
        for r in rows
        if r["tokenizer"] == tokenizer and r.get(metric) is not None and math.isfinite(float(r[metric]))
    }


def _tokenizers(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["tokenizer"] for r in rows))


#: Metrics measured against a reference language: the reference's own row (always 1) is no measurement.
RELATIVE_METRICS = ("parity", "parity_corpus")


def summarize(
    rows: Sequence[dict], metric: str = "bytes_per_token", reference: str | None = None
) -> list[dict[str, Any]]:
    """Per tokenizer: languages, mean, median, min, max and Gini of one metric across languages.

    For the parity metrics, the `reference` language (compared with itself: always 1) is left out."""
    out = []
    for t in _tokenizers(rows):
        values = _values(rows, t, metric)
        if metric in RELATIVE_METRICS and reference is not None:
            values.pop(reference, None)
        v = np.asarray(list(values.values()), dtype=np.float64)
        out.append(
            {
                "tokenizer": t,
                "metric": metric,
                "languages": int(v.size),
                "mean": float(v.mean()) if v.size else None,
                "median": float(np.median(v)) if v.size else None,
                "min": float(v.min()) if v.size else None,
                "max": float(v.max()) if v.size else None,
                "gini": gini(v),
            }
        )
    return out


def script_group(script: str, table2: bool = True) -> str:
    """A script's group: with table2=True the groups of Purason et al., Table 2 (Latn, Cyrl, Arab, Jpan, Hani, Other)."""
    s = {"Hans": "Hani", "Hant": "Hani"}.get(script, script)
    if table2 and s not in TABLE2_GROUPS:
        return "Other"
    return s


def script_summary(
    rows: Sequence[dict], metric: str = "bytes_per_token", table2: bool = True
) -> list[dict[str, Any]]:
    """Mean of a metric per script group and tokenizer, with the language count n (Purason et al., Table 2 layout)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        v = r.get(metric)
        if v is None or not math.isfinite(float(v)):
            continue
        groups.setdefault((script_group(r["script"], table2), r["tokenizer"]), []).append(float(v))
    order = list(TABLE2_GROUPS) + ["Other"] if table2 else sorted({g for g, _ in groups})
    out = []
    for g in order:
        for t in _tokenizers(rows):
            vals = groups.get((g, t))
            if vals:
                out.append({"script": g, "tokenizer": t, "n": len(vals), "mean": float(np.mean(vals))})
    return out


def compare(
    rows: Sequence[dict],
    a: str,
    b: str,
    metric: str = "bytes_per_token",
    higher_is_better: bool | None = None,
) -> dict[str, Any]:
    """Tokenizer a vs b on the languages both have: mean Δrel = a/b − 1 and win rate of a (Purason et al., Table 1).

    For a lower-is-better metric (fertility, parity…) a "win" is a lower value, and Δrel is still a/b − 1.
    """
    hib = HIGHER_IS_BETTER.get(metric, True) if higher_is_better is None else higher_is_better
    va, vb = _values(rows, a, metric), _values(rows, b, metric)
    common = [k for k in va if k in vb and vb[k] != 0]
    per = []
    for k in common:
        d = va[k] / vb[k] - 1.0
        win = va[k] > vb[k] if hib else va[k] < vb[k]
        per.append({"lang": k, "a": va[k], "b": vb[k], "delta_rel": d, "win": bool(win)})
    n = len(per)
    return {
        "a": a,
        "b": b,
        "metric": metric,
        "languages": n,
        "delta_rel": float(np.mean([p["delta_rel"] for p in per])) if n else None,
        "win_rate": sum(p["win"] for p in per) / n if n else None,
        "per_language": per,
    }


def script_compare(
    rows: Sequence[dict], a: str, b: str, metric: str = "bytes_per_token", table2: bool = True
) -> list[dict[str, Any]]:
    """Mean Δrel (a/b − 1) per script group, as in Purason et al., Table 2."""
    script_of_lang = {r["lang"]: r["script"] for r in rows}
    per = compare(rows, a, b, metric)["per_language"]
    groups: dict[str, list[float]] = {}
    for p in per:
        groups.setdefault(script_group(script_of_lang[p["lang"]], table2), []).append(p["delta_rel"])
    order = list(TABLE2_GROUPS) + ["Other"] if table2 else sorted(groups)
    return [
        {"script": g, "n": len(groups[g]), "delta_rel": float(np.mean(groups[g]))}
        for g in order
        if g in groups
    ]


def worst_sentences(tok: LoadedTokenizer, lines: Sequence[str], k: int = 10) -> list[dict[str, Any]]:
    """The k sentences with the lowest bytes/token, each with its tokens (readable) and ids."""
    idx = [i for i, s in enumerate(lines) if s]
    sel = [lines[i] for i in idx]
    if not sel:
        raise DataError("no non-empty lines to measure")
    enc = rust_tokenizer(tok).encode_batch(sel, add_special_tokens=False)
    bpt = [(len(s.encode("utf-8")) / len(e.ids) if e.ids else float("inf")) for s, e in zip(sel, enc)]
    order = sorted(range(len(sel)), key=lambda j: bpt[j])[: max(0, k)]
    out = []
    for j in order:
        e = enc[j]
        out.append(
            {
                "index": idx[j],
                "text": sel[j],
                "tokens": len(e.ids),
                "bytes": len(sel[j].encode("utf-8")),
                "bytes_per_token": bpt[j],
                "ids": list(e.ids),
                "offsets": [tuple(o) for o in e.offsets],
                "pieces": [tok.readable(t) for t in e.tokens],
            }
        )
    return out


def worst_languages(
    rows: Sequence[dict], metric: str = "bytes_per_token", k: int = 20
) -> dict[str, list[dict]]:
    """Per tokenizer, its `k` worst languages on a metric (lowest first for higher-is-better metrics, highest
    first otherwise): ``{tokenizer: [{"lang", "name", "script", "value"}, …]}``."""
    hib = HIGHER_IS_BETTER.get(metric, True)
    meta = {r["lang"]: r for r in rows}
    out = {}
    for t in _tokenizers(rows):
        vals = sorted(_values(rows, t, metric).items(), key=lambda kv: kv[1], reverse=not hib)[:k]
        out[t] = [
            {"lang": c, "name": meta[c].get("name", c), "script": meta[c].get("script", ""), "value": v}
            for c, v in vals
        ]
    return out


def to_latex(
    rows: Sequence[dict],
    columns: Sequence[str],
    caption: str = "",
    digits: int = 3,
    *,
    longtable: bool = False,
    label: str = "",
) -> str:
    """A booktabs LaTeX table of the given columns (special characters escaped).

    With `longtable` (for hundreds of rows, e.g. all 204 FLORES languages) the table breaks across pages and
    repeats its header on each one (``\\usepackage{booktabs,longtable}``); numbers are right-aligned, in a
    footnote-sized font so that up to eight tokenizer columns fit the text width.
    """

    def esc(v: Any) -> str:
        """One cell as LaTeX text."""
        if v is None:
            return "--"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        s = str(v)
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                     ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")):  # fmt: skip
            s = s.replace(a, b)
        return s

    head = " & ".join(esc(c) for c in columns)
    body = "\n".join(" & ".join(esc(r.get(c)) for c in columns) + r" \\" for r in rows)
    cap = f"\\caption{{{esc(caption)}}}\n" if caption else ""
    lab = f"\\label{{{label}}}" if label else ""
    if longtable:
        numeric = [any(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows)
                   for c in columns]  # fmt: skip
        spec = "".join("r" if n else "l" for n in numeric)
        cap_lt = f"\\caption{{{esc(caption)}}}{lab}\\\\\n" if caption else ""
        return (
            "% needs \\usepackage{booktabs,longtable}\n{\\footnotesize\\setlength{\\tabcolsep}{4pt}\n"
            f"\\begin{{longtable}}{{{spec}}}\n{cap_lt}\\toprule\n{head} \\\\\n\\midrule\n\\endfirsthead\n"
            f"\\toprule\n{head} \\\\\n\\midrule\n\\endhead\n\\bottomrule\n\\endlastfoot\n"
            f"{body}\n\\end{{longtable}}\n}}\n"
        )
    spec = "l" * len(columns)
    return (
        f"\\begin{{table}}[t]\n\\centering\n{cap}\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head} \\\\\n\\midrule\n"
        f"{body}\n\\bottomrule\n\\end{{tabular}}\n\\end{{table}}\n"
    )
