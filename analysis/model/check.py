"""An edited model measured against the original one, language by language, on the same bytes.

For an original (model, tokenizer) and an edited one (extension, pruning, token reuse: the model exported next
to the edited tokenizer), each language's lines are read by both:

* **bits per byte** before and after (:mod:`analysis.model.bpb`: the same UTF-8 bytes, each line conditioned
  on its prefix token, long lines in sliding windows), and tokens per byte;
* **mass on new ids** (new = edited ids whose string the original vocabulary lacks): the mean probability the
  edited model puts on new ids when it reads the text tokenized the OLD way (Hewitt, "Initializing New Word
  Embeddings for Pretrained Language Models", 2021: random rows can take almost all of it);
* **KL on unchanged spans**: at every position whose next token is the same in both tokenizations (same bytes,
  same start, same string), KL(p_original ‖ p_edited) in nats over the ids both vocabularies share (the
  original's distribution renormalised over them; mass the edited model sends to new ids counts as loss);
* **mass on removed ids** (removed = original ids whose string the edited vocabulary lacks): the mean
  probability the original model put on them reading its own tokenization (what a pruning takes away);
* **per new token**: how often it occurs in the edited tokenization, the largest probability the edited model
  gives it anywhere in the text and how often it is the argmax (whether the model can emit it).

One pass per group of lines runs the original once and then every *variant* of the edited model (the model as
exported, each initialisation of a bake-off, a warm-up checkpoint): a variant is a name and a callable that
prepares the edited model (e.g. writes other rows into it), so variants that differ only in a few rows share
one model in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.core.progress import Cancelled, Progress, report
from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .bpb import (
    LN2,
    STRIDE,
    WINDOW,
    Prefix,
    batch_tokens_for,
    check_vocab,
    encode_lines,
    iter_logprobs,
    prefix_token,
    segments,
)

#: A variant of the edited model: its name and what prepares the model before it is read (None: nothing).
Variant = tuple[str, Callable[[], None] | None]


def new_ids(original: LoadedTokenizer, edited: LoadedTokenizer) -> list[int]:
    """Ids of `edited` whose token string `original` lacks (the rows an extension initialises)."""
    have = set(original.vocab) | {a.content for a in original.added_tokens}
    return sorted(i for i, s in edited.id_to_token.items() if s not in have)


def removed_ids(original: LoadedTokenizer, edited: LoadedTokenizer) -> list[int]:
    """Ids of `original` whose token string `edited` lacks (what a pruning removed)."""
    have = set(edited.vocab) | {a.content for a in edited.added_tokens}
    return sorted(i for i, s in original.id_to_token.items() if s not in have)


@dataclass
class LanguageCheck:
    """One language, one variant of the edited model."""

    lang: str
    variant: str
    lines: int
    bytes: int
    bits_original: float
    bits_edited: float
    tokens_original: int
    tokens_edited: int
    #: mean Σ p(new ids) of the edited model over the positions of the old tokenization (None: no new ids)
    mass_new_on_old_text: float | None
    #: mean KL(p_original ‖ p_edited), nats, over positions whose next token did not change
    kl_unchanged: float | None
    unchanged_positions: int
    #: mean Σ p(removed ids) of the original model over its own positions (None: nothing removed)
    mass_removed: float | None

    @property
    def bpb_original(self) -> float:
        """Bits per byte of the original pair."""
        return self.bits_original / self.bytes if self.bytes else float("nan")

    @property
    def bpb_edited(self) -> float:
        """Bits per byte of the edited pair."""
        return self.bits_edited / self.bytes if self.bytes else float("nan")

    def to_json(self) -> dict[str, Any]:
        """The per-language record of the JSON document."""
        return {
            "lang": self.lang,
            "variant": self.variant,
            "bpb_original": self.bpb_original,
            "bpb_edited": self.bpb_edited,
            "delta_bpb": self.bpb_edited - self.bpb_original,
            "tokens_per_byte_original": self.tokens_original / self.bytes if self.bytes else None,
            "tokens_per_byte_edited": self.tokens_edited / self.bytes if self.bytes else None,
            "mass_new_on_old_text": self.mass_new_on_old_text,
            "kl_unchanged": self.kl_unchanged,
            "unchanged_positions": self.unchanged_positions,
            "mass_removed": self.mass_removed,
            "lines": self.lines,
            "bytes": self.bytes,
            "tokens_original": self.tokens_original,
            "tokens_edited": self.tokens_edited,
        }


@dataclass
class NewTokenUse:
    """How the edited model treats one new token over all languages read (one variant)."""

    id: int
    token: str
    occurrences: int = 0
    max_prob: float = 0.0
    argmax_count: int = 0
    #: mean log₂ probability at the positions where it is the next token (None: it never occurs)
    mean_log2_prob: float | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return dict(self.__dict__)


@dataclass
class _Acc:
    """Running sums of one variant on one language."""

    bits: float = 0.0
    tokens: int = 0
    mass_new: float = 0.0
    mass_new_n: int = 0
    kl: float = 0.0
    kl_n: int = 0


@dataclass
class CheckRun:
    """The raw result of :func:`compare`: per variant, the languages and the new tokens' use."""

    languages: dict[str, list[LanguageCheck]] = field(default_factory=dict)
    new_tokens: dict[str, list[NewTokenUse]] = field(default_factory=dict)
    prefix_original: Prefix | None = None
    prefix_edited: Prefix | None = None
    complete: bool = True


def byte_lengths(tok: LoadedTokenizer) -> np.ndarray:
    """The UTF-8 byte length of every id's token (0 for gaps)."""
    out = np.zeros(max(tok.id_to_token) + 1, dtype=np.int64)
    added = {a.id for a in tok.added_tokens}
    for i, s in tok.id_to_token.items():
        out[i] = len(s.encode("utf-8")) if i in added else len(tok.token_bytes(s))
    return out


def _starts(seq: Sequence[int], lengths: np.ndarray) -> np.ndarray:
    """Byte offset where each token of `seq` (after the prefix at position 0) starts; position 0 → −1."""
    lens = lengths[np.asarray(seq[1:], dtype=np.int64)]
    return np.concatenate([[-1], np.concatenate([[0], np.cumsum(lens)[:-1]])])


def aligned_positions(
    old_seq: Sequence[int],
    new_seq: Sequence[int],
    old_len: np.ndarray,
    new_len: np.ndarray,
    same: Callable[[int, int], bool],
) -> list[tuple[int, int]]:
    """(old position, new position) pairs of targets (positions ≥ 1) that start at the same byte, have the same
    length and the same string (`same(old_id, new_id)`): the predictions both models make for the same token."""
    if len(old_seq) < 2 or len(new_seq) < 2:
        return []
    so, sn = _starts(old_seq, old_len), _starts(new_seq, new_len)
    at = {int(b): p for p, b in enumerate(so) if p >= 1}
    out = []
    for q in range(1, len(new_seq)):
        p = at.get(int(sn[q]))
        if p is not None and old_len[old_seq[p]] == new_len[new_seq[q]] and same(old_seq[p], new_seq[q]):
            out.append((p, q))
    return out


def _groups(seqs: Sequence[Sequence[int]], max_tokens: int) -> list[list[int]]:
    """Line indices in consecutive groups of at most `max_tokens` tokens (at least one line each)."""
    out: list[list[int]] = []
    cur: list[int] = []
    n = 0
    for i, s in enumerate(seqs):
        if cur and n + len(s) > max_tokens:
            out.append(cur)
            cur, n = [], 0
        cur.append(i)
        n += len(s)
    if cur:
        out.append(cur)
    return out


def compare(
    original: Any,
    original_tok: LoadedTokenizer,
    edited: Any,
    edited_tok: LoadedTokenizer,
    texts: dict[str, Sequence[str]],
    *,
    variants: Sequence[Variant] = (("edited", None),),
    device_original: str = "cpu",
    device_edited: str = "cpu",
    window: int = WINDOW,
    stride: int = STRIDE,
    batch_tokens: int | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> CheckRun:
    """Read every language's lines with the original and every variant of the edited model (see the module
    docstring). `texts` maps a language (or any label) to its lines. Stops between groups of lines when
    `should_stop()` is true or `progress` raises Cancelled (``complete`` is then False; finished groups count).
    """
    import torch  # noqa: PLC0415 - heavy, only when models run

    check_vocab(original, original_tok, "the original model")
    check_vocab(edited, edited_tok, "the edited model")
    if not texts or not any(texts.values()):
        raise DataError("no text to read: give at least one language with lines")
    p_o = prefix_token(original_tok, original.config)
    p_e = prefix_token(edited_tok, edited.config)
    if p_o.token != p_e.token:
        raise DataError(
            f"the two models condition on different prefix tokens ({p_o.token!r} vs {p_e.token!r}): "
            "their bits per byte would not compare"
        )
    new = new_ids(original_tok, edited_tok)
    removed = removed_ids(original_tok, edited_tok)
    e_ids = {s: i for i, s in edited_tok.id_to_token.items()}
    # original id → edited id for every shared string (-1: removed)
    o2e = np.full(max(original_tok.id_to_token) + 1, -1, dtype=np.int64)
    for i, s in original_tok.id_to_token.items():
        o2e[i] = e_ids.get(s, -1)
    shared_o = torch.as_tensor(np.flatnonzero(o2e >= 0))
    shared_e = torch.as_tensor(o2e[o2e >= 0])
    new_t = torch.as_tensor(new, dtype=torch.long)
    removed_t = torch.as_tensor(removed, dtype=torch.long)
    len_o, len_e = byte_lengths(original_tok), byte_lengths(edited_tok)

    def same(a: int, b: int) -> bool:
        return int(o2e[a]) == int(b)

    run = CheckRun(prefix_original=p_o, prefix_edited=p_e)
    uses = {name: {i: NewTokenUse(i, edited_tok.id_to_token[i]) for i in new} for name, _ in variants}
    logp_sums = {name: np.zeros(len(new)) for name, _ in variants}
    new_pos = {i: r for r, i in enumerate(new)}
    budget = batch_tokens or min(batch_tokens_for(original), batch_tokens_for(edited))
    total = sum(len(v) for v in texts.values())
    done = 0
    try:
        for lang, lines in texts.items():
            lines = list(lines)
            old = encode_lines(original_tok, lines, p_o)
            nw = encode_lines(edited_tok, lines, p_e)
            accs = {name: _Acc() for name, _ in variants}
            bits_o, mass_rm, mass_rm_n, tokens_o = 0.0, 0.0, 0, sum(len(s) - 1 for s in old)
            for group in _groups(old, budget):
                if should_stop and should_stop():
                    raise Cancelled("stopped")
                # the original: bits, mass on removed ids, the reference rows at aligned positions
                align = {d: aligned_positions(old[d], nw[d], len_o, len_e, same) for d in group}
                want = {(d, p) for d in group for p, _ in align[d]}
                ref: dict[tuple[int, int], Any] = {}
                segs = segments([old[d] for d in group], window=window, stride=stride)
                for seg, logp in iter_logprobs(original, segs, device=device_original, batch_tokens=budget):
                    d = group[seg.doc]
                    t = torch.as_tensor(seg.targets, device=logp.device)
                    bits_o -= float(logp.gather(1, t[:, None]).double().sum()) / LN2
                    if len(removed):
                        mass_rm += float(logp[:, removed_t.to(logp.device)].exp().sum(1).double().sum())
                        mass_rm_n += logp.shape[0]
                    rows = [(r, pos) for r, pos in enumerate(seg.target_positions) if (d, pos) in want]
                    if rows:
                        sub = logp[[r for r, _ in rows]][:, shared_o.to(logp.device)]
                        sub = (
                            sub - torch.logsumexp(sub, 1, keepdim=True)
                        ).cpu()  # renormalised over shared ids
                        for k, (_, pos) in enumerate(rows):
                            ref[(d, pos)] = sub[k]
                for name, prepare in variants:
                    if prepare is not None:
                        prepare()
                    _read_edited(edited, group, nw, old, o2e, align, ref, accs[name], uses[name],
                                 logp_sums[name], new_pos, new_t, shared_e, device_edited, window, stride,
                                 budget)  # fmt: skip
                done += len(group)
                report(progress, done, total, f"{lang}: lines read")
            n_bytes = sum(len(s.encode("utf-8")) for s in lines)
            for name, _ in variants:
                a = accs[name]
                run.languages.setdefault(name, []).append(
                    LanguageCheck(
                        lang=lang,
                        variant=name,
                        lines=len(lines),
                        bytes=n_bytes,
                        bits_original=bits_o,
                        bits_edited=a.bits,
                        tokens_original=tokens_o,
                        tokens_edited=a.tokens,
                        mass_new_on_old_text=a.mass_new / a.mass_new_n if a.mass_new_n else None,
                        kl_unchanged=a.kl / a.kl_n if a.kl_n else None,
                        unchanged_positions=a.kl_n,
                        mass_removed=mass_rm / mass_rm_n if mass_rm_n else None,
                    )
                )
    except Cancelled:
        run.complete = False
    for name, _ in variants:
        for r, i in enumerate(new):
            u = uses[name][i]
            if u.occurrences:
                u.mean_log2_prob = float(logp_sums[name][r] / u.occurrences / LN2)
        run.new_tokens[name] = list(uses[name].values())
    return run


def _read_edited(
    edited: Any,
    group: list[int],
    nw: list[list[int]],
    old: list[list[int]],
    o2e: np.ndarray,
    align: dict[int, list[tuple[int, int]]],
    ref: dict[tuple[int, int], Any],
    acc: _Acc,
    uses: dict[int, NewTokenUse],
    logp_sum: np.ndarray,
    new_pos: dict[int, int],
    new_t: Any,
    shared_e: Any,
    device: str,
    window: int,
    stride: int,
    budget: int,
) -> None:
    """One variant of the edited model on one group of lines: its own tokenization (bits, KL at aligned
    positions, the new tokens' use), then the old tokenization mapped to its ids (mass on new ids)."""
    import torch  # noqa: PLC0415 - heavy, only when models run

    back = {d: {q: p for p, q in align[d]} for d in group}
    segs = segments([nw[d] for d in group], window=window, stride=stride)
    for seg, logp in iter_logprobs(edited, segs, device=device, batch_tokens=budget):
        d = group[seg.doc]
        t = torch.as_tensor(seg.targets, device=logp.device)
        at_target = logp.gather(1, t[:, None])[:, 0]
        acc.bits -= float(at_target.double().sum()) / LN2
        acc.tokens += len(seg.targets)
        pairs = [(r, (d, back[d][pos])) for r, pos in enumerate(seg.target_positions) if pos in back[d]]
        pairs = [(r, key) for r, key in pairs if key in ref]
        if pairs:
            lp_o = torch.stack([ref[key] for _, key in pairs]).double()
            lp_e = logp[[r for r, _ in pairs]][:, shared_e.to(logp.device)].double().cpu()
            acc.kl += float((lp_o.exp() * (lp_o - lp_e)).sum())
            acc.kl_n += len(pairs)
        if len(new_t):
            sub = logp[:, new_t.to(logp.device)]
            best = sub.max(0).values.exp().cpu().numpy()
            arg = logp.argmax(1).cpu().numpy()
            for r, i in enumerate(new_pos):
                u = uses[i]
                if best[r] > u.max_prob:
                    u.max_prob = float(best[r])
            for a in arg:
                if int(a) in uses:
                    uses[int(a)].argmax_count += 1
            for tid, lp in zip(seg.targets, at_target.double().cpu().numpy()):
                if tid in uses:
                    uses[tid].occurrences += 1
                    logp_sum[new_pos[tid]] += float(lp)
    if not len(new_t):
        return
    mapped = []
    for d in group:
        ids = o2e[np.asarray(old[d], dtype=np.int64)]
        if (ids >= 0).all():
            mapped.append([int(i) for i in ids])
    segs = segments(mapped, window=window, stride=stride)
    for _seg, logp in iter_logprobs(edited, segs, device=device, batch_tokens=budget):
        m = logp[:, new_t.to(logp.device)].exp().sum(1).double()
        acc.mass_new += float(m.sum())
        acc.mass_new_n += int(m.numel())


def kl_from_mass(mass: float) -> float:
    """KL(p ‖ q) in nats when q is p scaled by (1 − `mass`) on the old ids: what an edited model whose old rows
    are untouched pays on old-tokenized text for the mass it sends to new ids (−ln(1 − mass))."""
    return -math.log1p(-mass) if mass < 1 else float("inf")
