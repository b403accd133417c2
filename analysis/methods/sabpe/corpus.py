"""SA-BPE's corpus statistic: per-source word counts of code records, counted shard by shard by the corpus jobs
(registered in :data:`analysis.jobs.stats.PLUGINS`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from analysis.errors import DataError
from analysis.texts.code import CodeRecord
from analysis.texts.stat import CHUNK_RECORDS, Doc, Emit, Stat, chunks, word_bucket
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .sabpe import SourceWords, collect_words, require_byte_level


class SourceWordCounts(Stat):
    """:func:`analysis.methods.sabpe.sabpe.collect_words` per chunk of records → counts per (word, repository), (word, language).

    Options `languages` (file stems kept), `max_files_per_repo`, `max_bytes_per_repo` (per file, as read_code).
    """

    name = "source-words"
    layout = "code"
    result = "analysis.methods.sabpe.sabpe.SourceWords"

    def options(self, tok: LoadedTokenizer, opts: dict) -> dict:
        """Check the base is byte-level; keep the record options."""
        require_byte_level(tok)
        langs = opts.get("languages")
        return {
            "languages": sorted(langs) if langs else None,
            "max_files_per_repo": opts.get("max_files_per_repo"),
            "max_bytes_per_repo": opts.get("max_bytes_per_repo"),
        }

    def map(self, tok: LoadedTokenizer, docs: Iterable[Doc], opts: dict, emit: Emit) -> dict:
        """collect_words per chunk of records; first-seen order of repositories and languages per shard."""
        acc: Counter = Counter()
        n_records = n_bytes = 0
        first: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
        for chunk in chunks(docs, CHUNK_RECORDS):
            recs = []
            for d in chunk:
                recs.append(CodeRecord(d.repo, d.language, d.path, d.text))
                repos, langs = first.setdefault(str(d.shard), ({}, {}))
                repos.setdefault(d.repo)
                langs.setdefault(d.language)
            sw = collect_words(tok, recs)
            n_records += sw.n_records
            n_bytes += sw.n_bytes
            for w, (rids, rcs), (lids, lcs) in zip(sw.words, sw.repo_dist, sw.lang_dist):
                for r, c in zip(rids, rcs):
                    acc[(w, 0, sw.repos[r])] += c
                for g, c in zip(lids, lcs):
                    acc[(w, 1, sw.languages[g])] += c
        emit(acc)
        seen = {s: {"repos": list(r), "languages": list(g)} for s, (r, g) in first.items()}
        return {"records": n_records, "bytes": n_bytes, "first_seen": seen}

    def bucket(self, key: Any, k: int) -> int:
        """By the word."""
        return word_bucket(key[0], k)

    def finalize(self, tok: LoadedTokenizer, counts: Counter, totals: dict, opts: dict) -> Any:
        """A SourceWords: words sorted, repositories and languages in first-seen order of the shard list."""
        if not totals.get("records"):
            raise DataError("the selected code corpus has no records with text")
        repos: list[str] = []
        langs: list[str] = []
        first = totals.get("first_seen", {})
        for s in sorted(first, key=int):
            for r in first[s]["repos"]:
                if r not in repos:
                    repos.append(r)
            for g in first[s]["languages"]:
                if g not in langs:
                    langs.append(g)
        r_ix = {r: i for i, r in enumerate(repos)}
        g_ix = {g: i for i, g in enumerate(langs)}
        by_repo: dict[str, dict[int, int]] = {}
        by_lang: dict[str, dict[int, int]] = {}
        for (w, kind, src), c in counts.items():
            if kind == 0:
                by_repo.setdefault(w, {})[r_ix[src]] = c
            else:
                by_lang.setdefault(w, {})[g_ix[src]] = c
        words = sorted(by_repo)
        freqs, rd, ld = [], [], []
        for w in words:
            d = dict(sorted(by_repo[w].items()))
            e = dict(sorted(by_lang[w].items()))
            freqs.append(sum(d.values()))
            rd.append((tuple(d), tuple(d.values())))
            ld.append((tuple(e), tuple(e.values())))
        return SourceWords(words, freqs, rd, ld, repos, langs, int(totals["records"]), int(totals["bytes"]))
