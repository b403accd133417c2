"""Live preview: before/after metrics of every method at any n, from cached plans, without rebuilding tokenizers.

The measures of Purason et al. (2025): bytes per token on held-out text, the share of new tokens used,
STT-unreachable new tokens, and the change of the English tokenization (exact match, normalised Levenshtein
distance; their Table 6).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from analysis.bpe import fold_merges
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .methods import METHOD_LABELS, Extension, added_token_contents, next_id
from .plan import Plan
from .simulator import (
    ADDED_MARK,
    PrefixSimulator,
    simulated_unreachable,
    stt_model_tokenize,
    tokenization_change,
)


# --------------------------------------------------------------------------------------------------
# Live preview: every method at any n, from cached plans, without rebuilding tokenizers
# --------------------------------------------------------------------------------------------------
def _single_chars(base: LoadedTokenizer, tokens: Sequence[str]) -> list[str]:
    """New single-character tokens (SentencePiece-style vocabularies: they replace byte-fallback pieces)."""
    if base.is_byte_level:
        return []
    vocab = base.vocab
    return [t for t in tokens if len(t) == 1 and t not in vocab]


class Preview:
    """Before/after metrics of several extension plans on fixed texts, at any n ≤ each plan's size.

    `texts` maps a label to lines; `target` names the held-out target text, `english` the English one
    (exact match / Levenshtein to the base tokenization, Purason et al. 2025, Table 6), `sentence` is shown before/after.
    """

    def __init__(
        self,
        base: LoadedTokenizer,
        plans: dict[str, Plan],
        texts: dict[str, Sequence[str]],
        target: str,
        english: str | None = None,
        sentence: str | None = None,
    ) -> None:
        self.base = base
        self.plans = plans
        self.texts = {k: [s for s in v if s] for k, v in texts.items()}
        self.target = target
        self.english = english
        self.sentence = sentence or (self.texts[target][0] if self.texts.get(target) else "")
        self._sims: dict[tuple[str, ...], PrefixSimulator] = {}
        self._stt: dict[tuple[str, ...], Callable[[str], list]] = {}
        self._real: dict[tuple[str, int], Extension] = {}

    def sim_for(self, method: str) -> PrefixSimulator:
        """The simulator matching a plan (SentencePiece plans that add characters need them pre-split)."""
        p = self.plans[method]
        extra = (
            tuple(_single_chars(self.base, p.all_tokens()))
            if method in ("continued", "regen", "merges")
            else ()
        )
        sim = self._sims.get(extra)
        if sim is None:
            texts = dict(self.texts)
            texts["__sentence__"] = [self.sentence] if self.sentence else []
            sim = self._sims[extra] = PrefixSimulator(self.base, texts, extra_chars=extra)
        return sim

    def stt_tokenize(self, extra: tuple[str, ...] = ()) -> Callable[[str], list]:
        """Cached model-only tokenize (ignore_merges off) for the STT of new tokens."""
        fn = self._stt.get(extra)
        if fn is None:
            fn = self._stt[extra] = stt_model_tokenize(self.base, extra)
        return fn

    def base_metrics(self) -> dict[str, float]:
        """Bytes/token of the base tokenizer on every text."""
        sim = self.sim_for(next(iter(self.plans))) if self.plans else PrefixSimulator(self.base, self.texts)
        m = sim.measure([], [], list(self.texts))
        return {k: v["bytes_per_token"] for k, v in m.items()}

    def rows_at(
        self, method: str, n: int, names: Sequence[str]
    ) -> tuple[dict[str, list[list[int]]], dict, list]:
        """(ids per line for each text, new token → id, added list) for method at n."""
        p = self.plans[method]
        n = min(n, p.n_available)
        toks = p.tokens(n)
        nid = next_id(self.base)
        if method in ("continued", "regen", "merges"):
            sim = self.sim_for(method)
            added = [t for t in dict.fromkeys(toks) if t not in self.base.vocab]
            new_ids = {t: nid + i for i, t in enumerate(added)}
            changed = sim.segment(p.merge_table(n), toks, names)
            return (
                {k: [sim.ids(r, new_ids) for r in sim.line_tokens(k, changed)] for k in names},
                new_ids,
                added,
            )
        if method == "add-tokens":
            sim = self.sim_for(method)
            added = list(dict.fromkeys(added_token_contents(self.base, toks)))
            added = [c for c in added if c not in {a.content for a in self.base.added_tokens}]
            new_ids = {ADDED_MARK + c: nid + i for i, c in enumerate(added)}
            rows = sim.added_line_tokens(added, names)
            return {k: [sim.ids(r, new_ids) for r in rows[k]] for k in names}, new_ids, added
        ext = self.extension(method, n)  # WordPiece: small vocabularies, build the real tokenizer
        rows = {}
        for k in names:
            lines = self.texts[k] if k != "__sentence__" else [self.sentence]
            rows[k] = [
                e.ids for e in ext.tokenizer.tokenizer.encode_batch_fast(lines, add_special_tokens=False)
            ]
        return rows, dict(zip(ext.added, ext.added_ids)), ext.added

    def extension(self, method: str, n: int) -> Extension:
        """The real extended tokenizer (built once per method and n; used for export)."""
        key = (method, n)
        if key not in self._real:
            self._real[key] = self.plans[method].apply(n)
        return self._real[key]

    def at(self, method: str, n: int) -> dict:
        """All preview numbers for one method at n."""
        t0 = time.perf_counter()
        p = self.plans[method]
        names = list(self.texts) + (["__sentence__"] if self.sentence else [])
        rows, new_ids, added = self.rows_at(method, n, names)
        base_rows = self._base_rows(names)
        id_new = set(new_ids.values())
        per_text = {}
        used_counts: Counter = Counter()
        for k in self.texts:
            nbytes = sum(len(s.encode("utf-8")) for s in self.texts[k])
            t_before = sum(map(len, base_rows[k]))
            t_after = sum(map(len, rows[k]))
            b0 = nbytes / t_before if t_before else float("nan")
            b1 = nbytes / t_after if t_after else float("nan")
            per_text[k] = {"before": b0, "after": b1, "delta_rel": (b1 - b0) / b0 if b0 else float("nan")}
            if k == self.target:
                used_counts = Counter(i for r in rows[k] for i in r if i in id_new)
        if method in ("continued", "regen", "merges"):
            extra = tuple(_single_chars(self.base, p.all_tokens()))
            unreachable = simulated_unreachable(
                self.base, p.merge_table(min(n, p.n_available)), p.tokens(n), extra, self.stt_tokenize(extra)
            )
        else:
            unreachable = []
        out = {
            "method": method,
            "label": METHOD_LABELS.get(method, method),
            "n": min(n, p.n_available),
            "added": len(added),
            "texts": per_text,
            "unreachable": unreachable,
            "unreachable_added": len(unreachable),
            "used_share": len(used_counts) / len(added) if added else float("nan"),
            "used_counts": {i: c for i, c in used_counts.items()},
            "new_ids": new_ids,
            "added_tokens": added,
        }
        if self.english and self.english in self.texts:
            out["english"] = tokenization_change(base_rows[self.english], rows[self.english])
        if self.sentence:
            out["sentence_before"] = base_rows["__sentence__"][0] if base_rows["__sentence__"] else []
            out["sentence_after"] = rows["__sentence__"][0] if rows["__sentence__"] else []
        out["seconds"] = time.perf_counter() - t0
        return out

    def _base_rows(self, names: Sequence[str]) -> dict[str, list[list[int]]]:
        if "__base__" not in self._real:
            tk = self.base.tokenizer
            rows = {}
            for k in list(self.texts) + ["__sentence__"]:
                lines = self.texts[k] if k != "__sentence__" else ([self.sentence] if self.sentence else [])
                rows[k] = (
                    [e.ids for e in tk.encode_batch_fast(lines, add_special_tokens=False)] if lines else []
                )
            self._real["__base__"] = rows  # type: ignore[assignment]
        return self._real["__base__"]  # type: ignore[return-value]

    def curve(self, method: str, points: Sequence[int]) -> list[tuple[int, float]]:
        """Bytes/token on the target text at each n of `points` (one plan, no retraining)."""
        p = self.plans[method]
        out = []
        if method in ("continued", "regen", "merges"):
            sim = self.sim_for(method)
            for n in points:
                n = min(n, p.n_available)
                m = sim.measure(p.merge_table(n), p.tokens(n), [self.target])
                out.append((n, m[self.target]["bytes_per_token"]))
        elif method == "add-tokens":
            sim = self.sim_for(method)
            for n in points:
                contents = added_token_contents(self.base, p.tokens(min(n, p.n_available)))
                out.append((n, sim.measure_added(contents, [self.target])[self.target]["bytes_per_token"]))
        else:
            for n in points:
                rows, _, _ = self.rows_at(method, n, [self.target])
                nbytes = sum(len(s.encode("utf-8")) for s in self.texts[self.target])
                out.append((n, nbytes / max(1, sum(map(len, rows[self.target])))))
        return out

    def merge_tree(self, method: str, n: int, token: str) -> dict:
        """How a new token is built: appended merges over the base model's segmentation (ignore_merges off).

        Nodes: {"token", "text", "new", "children"}; leaves are base tokens. `reachable` says whether the
        root is the token itself.
        """
        p = self.plans[method]
        table = p.merge_table(min(n, p.n_available))
        extra = tuple(_single_chars(self.base, p.all_tokens()))
        base = self.base
        leaves = [x.value for x in self.stt_tokenize(extra)(token)]
        _final, events = table.run(leaves)

        def node(s: str, children: list[dict], rank: int | None = None) -> dict:
            out = {"token": s, "text": base.readable(s), "new": bool(children) and s not in base.vocab}
            if children:
                out["rank"] = rank
            out["children"] = children
            return out

        nodes = fold_merges(
            [node(s, []) for s in leaves],
            events,
            lambda a, b, ev: node(table.symbols[ev[2]], [a, b], ev[3] + 1),
        )
        if len(nodes) == 1 and nodes[0]["token"] == token:
            root = nodes[0]
            root["reachable"] = True
            return root
        return {
            "token": token,
            "text": base.readable(token),
            "new": True,
            "reachable": False,
            "children": nodes,
        }
