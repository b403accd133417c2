"""The model check's measuring pass: an edited model measured against the original one, language by language, on the
same bytes (:mod:`analysis.evaluate.model_check` loads the pair and runs this).

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
  gives it anywhere in the text and how often it is the argmax (whether the model can emit it), and both again
  over the positions where it is *not* the next token (its misplaced probability: what
  :mod:`analysis.evaluate.flags` flags).

One pass per group of lines runs the original once and then every *variant* of the edited model (the model as
exported, each initialisation of a bake-off, a warm-up checkpoint): a variant is a name and a callable that
prepares the edited model (e.g. writes other rows into it), so variants that differ only in a few rows share
one model in memory. Each model reads each text once: when the edited model reads old-tokenized text exactly as
the original does (the same network and shared rows: extension, pruning's remap, R-BPE's re-initialised rows;
:func:`reads_like_original` checks it on one line), its predictions there are the original's final hidden states
through its own LM head, so the mass on new ids needs no forward pass of the edited model, and a line whose
tokenization did not change needs none at all (its KL is then lse_edited − lse_shared per position). Ids
correspond as :mod:`analysis.adapt.vocab_map` says (by token string, or a method's own map: R-BPE).

Why one file: :func:`compare` and the two readings it chooses between (:func:`_on_old_text`, :func:`_read_edited`)
are one pass that shares private state (``_Acc``, ``_Reference``, ``_Head``); the id correspondence they read
through lives in :mod:`analysis.adapt.vocab_map`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.adapt.vocab_map import EditedVocab, aligned_positions, byte_lengths
from analysis.core.progress import Cancelled, Progress, report
from analysis.errors import DataError
from analysis.model.bpb import (
    LN2,
    STRIDE,
    WINDOW,
    HeadInput,
    Prefix,
    Scored,
    batch_tokens_for,
    check_vocab,
    encode_lines,
    iter_logprobs,
    iter_scored,
    prefix_token,
    rows_of,
    segments,
)
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: A variant of the edited model: its name and what prepares the model before it is read (None: nothing).
Variant = tuple[str, Callable[[], None] | None]


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
    #: the largest probability it gets at a position whose next token is another (in either tokenization read)
    misplaced_max_prob: float = 0.0
    #: how often it is the argmax at a position whose next token is another
    misplaced_argmax: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return dict(self.__dict__)


@dataclass
class _Acc:
    """Running sums of one variant (or of the original) on one language. Terms that are tensors on a device
    wait in `pending` and are added by :meth:`settle`, once per language: no device synchronisation per line."""

    bits: float = 0.0
    tokens: int = 0
    mass_new: float = 0.0
    mass_new_n: int = 0
    kl: float = 0.0
    kl_n: int = 0
    mass_removed: float = 0.0
    mass_removed_n: int = 0
    pending: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, name: str, term: Any) -> None:
        """Add the 0-d tensor `term` to the field `name` at the next :meth:`settle`."""
        self.pending.setdefault(name, []).append(term)

    def settle(self) -> _Acc:
        """Add the pending terms to their fields (one transfer per field); returns self."""
        import torch  # noqa: PLC0415 - heavy, only when models run

        for name, terms in self.pending.items():  # terms of one field may come from two models' devices
            total = torch.stack([t.to(terms[0].device) for t in terms]).sum()
            setattr(self, name, getattr(self, name) + float(total))
        self.pending = {}
        return self


class _NewOnDevice:
    """The new ids' running measures on old-tokenized text, per variant, kept on the device of the logits: each
    new id's best probability and how often it is the argmax; read once, after the run (:meth:`into`). On
    old-tokenized text a new id is never the next token, so both are misplaced measures too."""

    def __init__(self, new_cols: Any, n_extra: int, names: Sequence[str]) -> None:
        self._cols_cpu, self._n_extra, self._names = new_cols, n_extra, list(names)
        self.device: Any = None

    def on(self, device: Any) -> _NewOnDevice:
        """Itself, its tensors allocated on `device` at the first call."""
        import torch  # noqa: PLC0415 - heavy, only when models run

        if self.device is None:
            with torch.inference_mode():
                self.cols = self._cols_cpu.to(device)
                #: column of the extra rows → position in the new ids (−1: a padding row)
                self.col_pos = torch.full((self._n_extra,), -1, dtype=torch.long, device=device)
                self.col_pos[self.cols] = torch.arange(len(self.cols), device=device)
                self.best = {n: torch.zeros(len(self.cols), device=device) for n in self._names}
                self.argmax = {
                    n: torch.zeros(len(self.cols), dtype=torch.long, device=device) for n in self._names
                }
            self.device = device
        return self

    def into(
        self,
        max_probs: dict[str, np.ndarray],
        misplaced: dict[str, np.ndarray],
        uses: dict[str, dict[int, NewTokenUse]],
        new: list[int],
    ) -> None:
        """Merge the measures into `max_probs` and `misplaced` (per variant, order of `new`) and the argmax
        counts of `uses` (all of them misplaced: a new id is never the next token of old-tokenized text)."""
        if self.device is None:
            return
        for name in self._names:
            best = self.best[name].double().cpu().numpy()
            np.maximum(max_probs[name], best, out=max_probs[name])
            np.maximum(misplaced[name], best, out=misplaced[name])
            for i, c in zip(new, self.argmax[name].cpu().tolist()):
                uses[name][i].argmax_count += int(c)
                uses[name][i].misplaced_argmax += int(c)


@dataclass
class CheckRun:
    """The raw result of :func:`compare`: per variant, the languages and the new tokens' use."""

    languages: dict[str, list[LanguageCheck]] = field(default_factory=dict)
    new_tokens: dict[str, list[NewTokenUse]] = field(default_factory=dict)
    prefix_original: Prefix | None = None
    prefix_edited: Prefix | None = None
    complete: bool = True
    #: whether old-tokenized text was scored for the edited model from the original's hidden states
    shared_states: bool = False


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


def _columns(ids: np.ndarray) -> Any:
    """A column selector for `ids`: ``slice(0, n)`` (a view, no copy) when they are 0 … n − 1, else a tensor."""
    import torch  # noqa: PLC0415 - heavy, only when models run

    if len(ids) and int(ids[0]) == 0 and int(ids[-1]) == len(ids) - 1 and bool((np.diff(ids) == 1).all()):
        return slice(0, len(ids))
    return torch.as_tensor(ids, dtype=torch.long)


def _take(t: Any, cols: Any) -> Any:
    """The columns `cols` (a :func:`_columns` selector) of the 2-D tensor `t`."""
    return t[:, cols] if isinstance(cols, slice) else t[:, cols.to(t.device)]


class _Reference:
    """The original model's distributions at the aligned positions of one group of lines, renormalised over the
    shared ids: kept as probabilities with their negative entropy, so that KL(p ‖ q) = Σ p ln p − Σ p ln q costs
    one product per row when the edited model's log-probabilities arrive."""

    def __init__(self) -> None:
        self.row: dict[tuple[int, int], int] = {}
        self._p: list[Any] = []
        self._neg: list[Any] = []
        self.p: Any = None
        self.neg: Any = None

    def add(self, keys: list[tuple[int, int]], lp: Any) -> None:
        """Rows `lp` (log-probabilities over the shared ids, not yet renormalised) for `keys`."""
        import torch  # noqa: PLC0415 - heavy, only when models run

        lp = lp - torch.logsumexp(lp, 1, keepdim=True)
        p = lp.exp()
        for k in keys:
            self.row[k] = len(self.row)
        self._neg.append(torch.special.xlogy(p, p).sum(1))
        self._p.append(p)

    def close(self) -> None:
        """One matrix of all rows (after the original's pass over the group)."""
        import torch  # noqa: PLC0415 - heavy, only when models run

        if self._p:
            self.p, self.neg = torch.cat(self._p), torch.cat(self._neg)
            self._p, self._neg = [], []

    def kl(self, rows: list[int], lp_e: Any) -> float:
        """Σ over `rows` of KL(p_row ‖ exp(lp_e row)), nats."""
        import torch  # noqa: PLC0415 - heavy, only when models run

        idx = torch.as_tensor(rows, dtype=torch.long, device=self.p.device)
        p = self.p.index_select(0, idx)
        cross = (p * lp_e.to(p.device)).sum(1)
        return float((self.neg.index_select(0, idx).double() - cross.double()).sum())


@dataclass
class _Head:
    """The edited head's rows that the original model lacks (new ids, padding rows), of one variant."""

    weight: Any
    bias: Any


def _extra_rows(edited: Any, extra: Any) -> _Head:
    """The rows `extra` of the edited model's LM head as it is now (after a variant's prepare)."""
    head = edited.get_output_embeddings()
    w = head.weight.detach()[extra.to(head.weight.device)].float().clone()
    bias = getattr(head, "bias", None)
    b = None if bias is None else bias.detach()[extra.to(bias.device)].float().clone()
    return _Head(w, b)


def _same_line(o: Sequence[int], n: Sequence[int], o2e: np.ndarray) -> bool:
    """Whether the new tokenization of a line is the old one with every id mapped (nothing changed)."""
    return len(o) == len(n) and bool(
        (o2e[np.asarray(o, dtype=np.int64)] == np.asarray(n, dtype=np.int64)).all()
    )


def reads_like_original(
    original: Any,
    edited: Any,
    seq: Sequence[int],
    o2e: np.ndarray,
    *,
    device_original: str = "cpu",
    device_edited: str = "cpu",
) -> bool:
    """Whether the edited model reading the old tokenization of `seq` (ids mapped) gives exactly what the
    original model's final hidden states through the edited LM head give: the same network, the same rows for
    every shared id, a plain linear head (no logit scaling or capping). Checked on one line; when it holds, text
    tokenized the old way never needs a forward pass of the edited model (its rows for new ids are never read
    as inputs there)."""
    import torch  # noqa: PLC0415 - heavy, only when models run

    ids = o2e[np.asarray(seq, dtype=np.int64)]
    if len(seq) < 2 or (ids < 0).any():
        return False
    shared_o = torch.as_tensor(np.flatnonzero(o2e >= 0))
    shared_e = torch.as_tensor(o2e[o2e >= 0])
    rows_e = rows_of(edited.get_output_embeddings())
    if int(shared_e.max()) >= rows_e:
        return False
    hook = HeadInput(original)
    try:
        with torch.inference_mode():
            lo = original(input_ids=torch.as_tensor([list(seq)]).to(device_original)).logits[0].float()
            h = hook.value[0]
            le = edited(input_ids=torch.as_tensor([ids.tolist()]).to(device_edited)).logits[0].float()
            head = edited.get_output_embeddings()
            pred = head(h.to(head.weight.device, head.weight.dtype)).float()
            pred[:, shared_e.to(pred.device)] = lo[:, shared_o.to(lo.device)].to(pred.device)
            diff = float((pred.to(le.device) - le).abs().max())
            scale = max(1.0, float(le.abs().max()))
    finally:
        hook.remove()
    tol = 1e-4 if original.dtype == torch.float32 and edited.dtype == torch.float32 else 2e-2
    return diff <= tol * scale


def compare(
    original: Any,
    original_tok: LoadedTokenizer,
    edited: Any,
    edited_tok: LoadedTokenizer | EditedVocab,
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
    shared_states: bool | None = None,
) -> CheckRun:
    """Read every language's lines with the original and every variant of the edited model (see the module
    docstring). `texts` maps a language (or any label) to its lines. Stops between groups of lines when
    `should_stop()` is true or `progress` raises Cancelled (``complete`` is then False; finished groups count).

    One forward pass per model and text: the original reads the old tokenization once; when the edited model
    reads old-tokenized text as the original does (:func:`reads_like_original`, checked on the first line; an
    extension or a row re-initialisation leaves every shared row and the network as they were), its
    predictions there are the original's final hidden states through the edited head — the mass on new ids
    comes from them, and a line whose tokenization did not change is not read again at all (its bits, KL and
    new-token measures follow from the same states). Only lines whose tokenization changed get a forward pass
    of each variant. `shared_states` forces that path on or off (None: the check decides; ``run.shared_states``
    says which ran). `edited_tok` is the edited tokenizer (ids correspond by string) or an :class:`EditedVocab`.
    """
    import torch  # noqa: PLC0415 - heavy, only when models run

    check_vocab(original, original_tok, "the original model")
    vocab = (
        edited_tok
        if isinstance(edited_tok, EditedVocab)
        else EditedVocab.from_tokenizers(original_tok, edited_tok)
    )
    rows = rows_of(edited.get_input_embeddings())
    if vocab.top > min(rows, rows_of(edited.get_output_embeddings())):
        raise DataError(
            f"the edited model has {rows:,} embedding rows but its tokenizer {vocab.name} has ids up to "
            f"{vocab.top - 1:,}: is this the model's own tokenizer?"
        )
    if not texts or not any(texts.values()):
        raise DataError("no text to read: give at least one language with lines")
    p_o = prefix_token(original_tok, original.config)
    p_e = prefix_token(vocab.tok, edited.config)
    same_row = 0 <= p_o.id < len(vocab.o2e) and int(vocab.o2e[p_o.id]) == p_e.id  # a transplant's mapped BOS
    if p_o.token != p_e.token and not same_row:
        raise DataError(
            f"the two models condition on different prefix tokens ({p_o.token!r} vs {p_e.token!r}): "
            "their bits per byte would not compare"
        )
    new, removed, o2e = vocab.new, vocab.removed, vocab.o2e
    shared_o = _columns(np.flatnonzero(o2e >= 0))
    shared_e = _columns(o2e[o2e >= 0])
    new_t = torch.as_tensor(new, dtype=torch.long)
    removed_t = torch.as_tensor(removed, dtype=torch.long)
    len_o, len_e = byte_lengths(original_tok), vocab.byte_len
    # the edited head's rows outside the shared ids (new ids, padding rows), and where the new ids sit among them
    is_extra = np.ones(rows_of(edited.get_output_embeddings()), dtype=bool)
    is_extra[o2e[o2e >= 0]] = False
    extra = torch.as_tensor(np.flatnonzero(is_extra))
    new_cols = torch.as_tensor(
        np.searchsorted(extra.numpy(), np.asarray(new, dtype=np.int64)), dtype=torch.long
    )
    all_shared = len(np.flatnonzero(o2e >= 0)) == rows_of(original.get_output_embeddings())
    n_shared = int((o2e >= 0).sum())

    def same(a: int, b: int) -> bool:
        return int(o2e[a]) == int(b)

    if shared_states is None:  # checked on the first line whose old ids all have a counterpart (≤ 64 tokens)
        first_lines = list(next(v for v in texts.values() if v))[:32]
        probes = [s[:64] for s in encode_lines(original_tok, first_lines, p_o)]
        probe = next((s for s in probes if (o2e[np.asarray(s, dtype=np.int64)] >= 0).all()), probes[0])
        shared_states = reads_like_original(original, edited, probe, o2e, device_original=device_original,
                                            device_edited=device_edited)  # fmt: skip
    run = CheckRun(prefix_original=p_o, prefix_edited=p_e, shared_states=shared_states)
    heads: dict[str, _Head] = {}
    if shared_states:
        for name, prepare in variants:
            if prepare is not None:
                prepare()
            heads[name] = _extra_rows(edited, extra)
    uses = {name: {i: NewTokenUse(i, vocab.tokens[i]) for i in new} for name, _ in variants}
    logp_sums = {name: np.zeros(len(new)) for name, _ in variants}
    max_probs = {name: np.zeros(len(new)) for name, _ in variants}  # per new id (order of `new`): its best p
    misplaced = {
        name: np.zeros(len(new)) for name, _ in variants
    }  # … and its best p where another token is next
    on_device = _NewOnDevice(new_cols, len(extra), [name for name, _ in variants])
    new_pos = {i: r for r, i in enumerate(new)}
    budget = batch_tokens or min(batch_tokens_for(original), batch_tokens_for(edited))
    total = sum(len(v) for v in texts.values())
    done = 0
    try:
        for lang, lines in texts.items():
            lines = list(lines)
            old = encode_lines(original_tok, lines, p_o)
            nw = [[p_e.id, *ids] for ids in vocab.encode(lines)]
            accs = {name: _Acc() for name, _ in variants}
            orig, tokens_o = _Acc(), sum(len(s) - 1 for s in old)
            for group in _groups(old, budget):
                if should_stop and should_stop():
                    raise Cancelled("stopped")
                kept = {d for d in group if shared_states and _same_line(old[d], nw[d], o2e)}
                mapped = {d for d in group if (o2e[np.asarray(old[d], dtype=np.int64)] >= 0).all()}
                changed = [d for d in group if d not in kept]
                align = {d: aligned_positions(old[d], nw[d], len_o, len_e, same) for d in changed}
                want = {(d, p) for d in changed for p, _ in align[d]}
                ref = _Reference()
                segs = segments([old[d] for d in group], window=window, stride=stride)
                # the original, once: bits, mass on removed ids, the reference rows at aligned positions; with
                # shared states also every variant's measures on old-tokenized text (its head on these states)
                for sc in iter_scored(original, segs, device=device_original, batch_tokens=budget,
                                      hidden=shared_states):  # fmt: skip
                    d = group[sc.seg.doc]
                    logp = sc.logp
                    at_target = logp.gather(1, sc.targets[:, None])[:, 0]
                    orig.add("bits", -at_target.double().sum() / LN2)
                    p_removed = None
                    if len(removed):
                        if removed_t.device != logp.device:
                            removed_t = removed_t.to(logp.device)
                        p_removed = logp[:, removed_t].exp().sum(1)
                        orig.add("mass_removed", p_removed.double().sum())
                        orig.mass_removed_n += logp.shape[0]
                    rows = [(r, pos) for r, pos in enumerate(sc.seg.target_positions) if (d, pos) in want]
                    if rows:
                        ref.add([(d, pos) for _, pos in rows], _take(logp[[r for r, _ in rows]], shared_o))
                    if shared_states and d in mapped:
                        _on_old_text(sc, at_target, p_removed, all_shared, removed_t, shared_o, n_shared, heads, accs,
                                     on_device.on(logp.device), new, d in kept)  # fmt: skip
                ref.close()
                for name, prepare in variants:
                    if not changed and shared_states:
                        break
                    if prepare is not None:
                        prepare()
                    _read_edited(edited, changed, nw, old, o2e, align, ref, accs[name], uses[name],
                                 logp_sums[name], max_probs[name], misplaced[name], new_pos, new_t, shared_e, device_edited, window,
                                 stride, budget, mass_on_old=not shared_states)  # fmt: skip
                done += len(group)
                report(progress, done, total, f"{lang}: lines read")
            n_bytes = sum(len(s.encode("utf-8")) for s in lines)
            orig.settle()
            for name, _ in variants:
                a = accs[name].settle()
                run.languages.setdefault(name, []).append(
                    LanguageCheck(
                        lang=lang,
                        variant=name,
                        lines=len(lines),
                        bytes=n_bytes,
                        bits_original=orig.bits,
                        bits_edited=a.bits,
                        tokens_original=tokens_o,
                        tokens_edited=a.tokens,
                        mass_new_on_old_text=a.mass_new / a.mass_new_n if a.mass_new_n else None,
                        kl_unchanged=a.kl / a.kl_n if a.kl_n else None,
                        unchanged_positions=a.kl_n,
                        mass_removed=orig.mass_removed / orig.mass_removed_n if orig.mass_removed_n else None,
                    )
                )
    except Cancelled:
        run.complete = False
    on_device.into(max_probs, misplaced, uses, new)
    for name, _ in variants:
        for r, i in enumerate(new):
            u = uses[name][i]
            u.max_prob = max(u.max_prob, float(max_probs[name][r]))
            u.misplaced_max_prob = max(u.misplaced_max_prob, float(misplaced[name][r]))
            if u.occurrences:
                u.mean_log2_prob = float(logp_sums[name][r] / u.occurrences / LN2)
        run.new_tokens[name] = list(uses[name].values())
    return run


def _on_old_text(
    sc: Scored,
    at_target: Any,
    p_removed: Any,
    all_shared: bool,
    removed_t: Any,
    shared_o: Any,
    n_shared: int,
    heads: dict[str, _Head],
    accs: dict[str, _Acc],
    on_device: _NewOnDevice,
    new: list[int],
    kept: bool,
) -> None:
    """Every variant of the edited model on one segment of old-tokenized text, from the original's states: its
    log-probabilities are the original's shifted by its own log-partition (the shared rows are the original's)
    plus the rows only it has. Always the mass on new ids; for a line whose tokenization did not change
    (`kept`) also its bits, the KL at every position and the new tokens' use (each new id's best probability
    and argmax count go to `on_device`). Nothing here waits for the device: sums go to the accumulators'
    pending terms."""
    import torch  # noqa: PLC0415 - heavy, only when models run

    logp = sc.logp
    # log Σ p_original over the shared ids (all of them unless some were removed)
    if all_shared:
        lse_sh = torch.zeros(logp.shape[0], device=logp.device)
    elif p_removed is not None and len(removed_t) + n_shared == logp.shape[1]:
        lse_sh = torch.log1p(-p_removed.clamp(max=1 - 1e-7))
    else:
        lse_sh = torch.logsumexp(_take(logp, shared_o), 1)
    top_sh = None
    for name, head in heads.items():
        acc = accs[name]
        h = sc.hidden.to(head.weight.device).float()
        z = h @ head.weight.T  # the extra rows' raw logits …
        if head.bias is not None:
            z = z + head.bias
        z = z.to(logp.device) - sc.lse[:, None]  # … in the original's log-probability units
        lse_e = torch.logaddexp(lse_sh, torch.logsumexp(z, 1))  # the edited model's log-partition, same units
        if len(new):
            lp_new = z[:, on_device.cols] - lse_e[:, None]
            acc.add("mass_new", lp_new.exp().sum(1).double().sum())
            acc.mass_new_n += logp.shape[0]
        if not kept:
            continue
        acc.add("bits", -(at_target - lse_e).double().sum() / LN2)
        acc.tokens += logp.shape[0]
        # KL(p_o renormalised over the shared ids ‖ p_e) = Σ p_ren (lp_o − lse_sh − lp_o + lse_e) = lse_e − lse_sh
        acc.add("kl", (lse_e - lse_sh).double().sum())
        acc.kl_n += logp.shape[0]
        if len(new):
            if top_sh is None:  # the largest log-probability among the shared ids (an argmax rival)
                top_sh = (logp if all_shared else _take(logp, shared_o)).max(1).values
            zmax, zarg = z.max(1)
            pos = on_device.col_pos[zarg]  # the argmax extra row's place among the new ids (−1: padding)
            wins = (zmax > top_sh) & (pos >= 0)  # it beats every shared id and is a new id
            with torch.inference_mode():
                best = on_device.best[name]
                torch.maximum(best, lp_new.max(0).values.exp(), out=best)
                on_device.argmax[name].index_add_(0, pos.clamp(min=0), wins.long())


def _read_edited(
    edited: Any,
    group: list[int],
    nw: list[list[int]],
    old: list[list[int]],
    o2e: np.ndarray,
    align: dict[int, list[tuple[int, int]]],
    ref: _Reference,
    acc: _Acc,
    uses: dict[int, NewTokenUse],
    logp_sum: np.ndarray,
    max_prob: np.ndarray,
    misplaced: np.ndarray,
    new_pos: dict[int, int],
    new_t: Any,
    shared_e: Any,
    device: str,
    window: int,
    stride: int,
    budget: int,
    *,
    mass_on_old: bool = True,
) -> None:
    """One variant of the edited model on the lines `group`: its own tokenization (bits, KL at aligned
    positions, the new tokens' use; each new id's best probability goes to `max_prob` and its best where another
    token is next to `misplaced`, in the order of `new_pos`), then, with `mass_on_old`, the old tokenization mapped to its ids (mass on new ids)."""

    if not group:
        return
    back = {d: {q: p for p, q in align[d]} for d in group}
    segs = segments([nw[d] for d in group], window=window, stride=stride)
    for sc in iter_scored(edited, segs, device=device, batch_tokens=budget):
        seg, logp = sc.seg, sc.logp
        d = group[seg.doc]
        at_target = logp.gather(1, sc.targets[:, None])[:, 0]
        acc.add("bits", -at_target.double().sum() / LN2)
        acc.tokens += len(seg.targets)
        pairs = [(r, (d, back[d][pos])) for r, pos in enumerate(seg.target_positions) if pos in back[d]]
        pairs = [(r, ref.row[key]) for r, key in pairs if key in ref.row]
        if pairs:
            lp_e = _take(logp[[r for r, _ in pairs]], shared_e)
            acc.kl += ref.kl([k for _, k in pairs], lp_e)
            acc.kl_n += len(pairs)
        if len(new_t):
            cols = new_t.to(logp.device)
            sub = logp[:, cols]
            np.maximum(max_prob, sub.max(0).values.exp().double().cpu().numpy(), out=max_prob)
            is_next = (
                sc.targets[:, None].to(logp.device) == cols[None, :]
            )  # the new id is this position's token
            away = sub.masked_fill(is_next, -math.inf).max(0).values.exp()
            np.maximum(misplaced, away.double().cpu().numpy(), out=misplaced)
            arg = logp.argmax(1).cpu().numpy()
            for a, tid in zip(arg, seg.targets):
                if int(a) in uses:
                    uses[int(a)].argmax_count += 1
                    if int(a) != int(tid):
                        uses[int(a)].misplaced_argmax += 1
            for tid, lp in zip(seg.targets, at_target.double().cpu().numpy()):
                if tid in uses:
                    uses[tid].occurrences += 1
                    logp_sum[new_pos[tid]] += float(lp)
    if not len(new_t) or not mass_on_old:
        return
    mapped = []
    for d in group:
        ids = o2e[np.asarray(old[d], dtype=np.int64)]
        if (ids >= 0).all():
            mapped.append([int(i) for i in ids])
    segs = segments(mapped, window=window, stride=stride)
    for _seg, logp in iter_logprobs(edited, segs, device=device, batch_tokens=budget):
        m = logp[:, new_t.to(logp.device)].exp().sum(1).double()
        acc.add("mass_new", m.sum())
        acc.mass_new_n += int(m.numel())


def kl_from_mass(mass: float) -> float:
    """KL(p ‖ q) in nats when q is p scaled by (1 − `mass`) on the old ids: what an edited model whose old rows
    are untouched pays on old-tokenized text for the mass it sends to new ids (−ln(1 − mass))."""
    return -math.log1p(-mass) if mass < 1 else float("inf")
