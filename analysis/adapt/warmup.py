"""Warm-up of the new rows only: N steps of training that update the new ids' input rows (and their output rows
when the head is not tied) and nothing else, through `peft`'s trainable tokens (``TrainableTokensConfig``: the
selected rows live in a small delta matrix, every other parameter is frozen; tied heads follow the input rows).

Two objectives:

* ``ntp`` — next-token loss of the edited model on training text tokenized by the edited tokenizer;
* ``distill`` — hidden-state distillation (after Dobler, Elliott & de Melo, "Token Distillation: Attention-aware
  Input Embeddings for New Tokens", ICLR 2026): on training lines that contain new tokens, the edited model's
  last hidden states at every token boundary the two tokenizations share must match the ORIGINAL model's
  hidden states at the same boundary under the original multi-token split (mean squared error).

Bits per byte on the held-out lines is measured at step 0, every `eval_every` steps and at the end (both ends
matter: early screens mislead). The warmed model is a copy; the edited model given is never changed. With `out`
the merged model and the edited tokenizer are written atomically.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.outputs import atomic_folder
from analysis.core.progress import Cancelled, Progress, report
from analysis.errors import DataError
from analysis.model.bpb import STRIDE, WINDOW, bits_per_byte, encode_lines, prefix_token

from .embeddings import save_model
from .vocab_map import byte_lengths, new_ids

OBJECTIVES = ("ntp", "distill")
#: Tokens per training sequence (a step of T tokens is T // SEQ_LEN sequences).
SEQ_LEN = 256


@dataclass
class WarmupConfig:
    """What a warm-up does."""

    steps: int
    objective: str = "ntp"
    tokens_per_step: int = 1024
    lr: float = 1e-3
    eval_every: int = 0
    seed: int = 0


@dataclass
class WarmupResult:
    """The warm-up's loss per step and its bits-per-byte curve."""

    objective: str
    steps: int
    steps_done: int
    trained_ids: int
    tied: bool
    losses: list[float] = field(default_factory=list)
    curve: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = True
    out: str | None = None
    model: Any = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (without the model)."""
        return {
            "objective": self.objective,
            "steps": self.steps,
            "steps_done": self.steps_done,
            "trained_ids": self.trained_ids,
            "tied": self.tied,
            "trainer": "peft TrainableTokens",
            "losses": self.losses,
            "curve": self.curve,
            "seconds": self.seconds,
            "complete": self.complete,
            "out": self.out,
        }


def _module_name(model: Any, module: Any) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name
    raise DataError("the model's embedding module is not among its modules")


def trainable_tokens_model(model: Any, ids: Sequence[int]) -> tuple[Any, bool]:
    """`model` wrapped by peft so that only the rows `ids` of the input embedding (and of an untied LM head)
    train; returns (peft model, tied)."""
    from peft import TrainableTokensConfig, get_peft_model  # noqa: PLC0415 - heavy, only for a warm-up

    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and head.weight.data_ptr() == emb.weight.data_ptr()
    targets = [_module_name(model, emb)]
    if head is not None and not tied:
        targets.append(_module_name(model, head))
    cfg = TrainableTokensConfig(token_indices=list(ids), target_modules=targets)
    return get_peft_model(model, cfg), tied


def _ntp_batches(seqs: list[list[int]], tokens: int, rng: random.Random) -> Callable[[], Any]:
    """A sampler of next-token batches: the training lines shuffled and packed into rows of SEQ_LEN tokens."""
    import torch  # noqa: PLC0415 - heavy, only for a warm-up

    stream = [i for s in seqs for i in s]
    seq = min(SEQ_LEN, tokens)
    rows = max(1, tokens // seq)
    n = len(stream) // seq
    if n < 1:
        raise DataError(f"the training text has fewer than {seq} tokens")
    data = torch.as_tensor(stream[: n * seq]).view(n, seq)

    def sample() -> Any:
        pick = [rng.randrange(n) for _ in range(rows)]
        return data[pick]

    return sample


def _distill_pairs(
    old: list[list[int]], nw: list[list[int]], len_o: np.ndarray, len_e: np.ndarray, new: set[int]
) -> list[tuple[list[int], list[int], list[tuple[int, int]]]]:
    """(old seq, new seq, [(old position, new position)]) of every line containing a new token: positions whose
    token ENDS at the same byte in both tokenizations, from the first new token on (the hidden state there has
    read the same text)."""
    out = []
    for o, n in zip(old, nw):
        first = next((q for q, t in enumerate(n) if t in new), None)
        if first is None:
            continue
        ends_o = np.cumsum(len_o[np.asarray(o[1:], dtype=np.int64)])
        ends_n = np.cumsum(len_e[np.asarray(n[1:], dtype=np.int64)])
        at = {int(b): p + 1 for p, b in enumerate(ends_o)}
        pairs = [(at[int(b)], q + 1) for q, b in enumerate(ends_n) if q + 1 >= first and int(b) in at]
        if pairs:
            out.append((o, n, pairs))
    return out


def _pad(seqs: list[list[int]]) -> tuple[Any, Any]:
    import torch  # noqa: PLC0415 - heavy, only for a warm-up

    width = max(len(s) for s in seqs)
    x = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros_like(x)
    for r, s in enumerate(seqs):
        x[r, : len(s)] = torch.as_tensor(s)
        mask[r, : len(s)] = 1
    return x, mask


def warm_up(
    original: Any,
    edited: Any,
    train: dict[str, Sequence[str]],
    heldout: dict[str, Sequence[str]],
    cfg: WarmupConfig,
    *,
    window: int = WINDOW,
    stride: int = STRIDE,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    out: str | None = None,
    replace: bool = False,
) -> WarmupResult:
    """Train a copy of `edited` (a :class:`analysis.evaluate.model_check.Loaded`) on `train` for ``cfg.steps``
    steps, only its new rows (ids whose string `original`'s vocabulary lacks); bits per byte on `heldout` along
    the way. Stops early (keeping the steps done, ``complete`` False) when `should_stop()` is true or `progress`
    raises Cancelled."""
    import torch  # noqa: PLC0415 - heavy, only for a warm-up

    if cfg.objective not in OBJECTIVES:
        raise DataError(f"unknown warm-up objective {cfg.objective!r}; choose {' or '.join(OBJECTIVES)}")
    if cfg.steps < 1:
        raise DataError("a warm-up needs at least one step")
    ids = new_ids(original.tok, edited.tok)
    if not ids:
        raise DataError("the edited vocabulary has no new tokens: there are no rows to warm up")
    t0 = time.perf_counter()
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    lines = [s for v in train.values() for s in v]
    prefix = prefix_token(edited.tok, edited.model.config)
    nw = encode_lines(edited.tok, lines, prefix)
    if cfg.objective == "ntp":
        sample = _ntp_batches(nw, cfg.tokens_per_step, rng)
        pairs = []
    else:
        old = encode_lines(original.tok, lines, prefix_token(original.tok, original.model.config))
        pairs = _distill_pairs(old, nw, byte_lengths(original.tok), byte_lengths(edited.tok), set(ids))
        if not pairs:
            raise DataError("no training line contains a new token: nothing to distil")
    targets: dict[int, Any] = {}  # the original model's hidden states per distillation line, computed once
    model = copy.deepcopy(edited.model)
    peft_model, tied = trainable_tokens_model(model, ids)
    peft_model.train()
    params = [p for p in peft_model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    every = cfg.eval_every or max(1, cfg.steps // 4)
    res = WarmupResult(cfg.objective, cfg.steps, 0, len(ids), tied)

    def evaluate(step: int) -> None:
        peft_model.eval()
        bpb = {
            lang: bits_per_byte(
                peft_model, edited.tok, v, device=edited.device, window=window, stride=stride
            ).bpb
            for lang, v in heldout.items()
        }
        res.curve.append({"step": step, "bpb": bpb})
        peft_model.train()

    try:
        evaluate(0)
        for step in range(1, cfg.steps + 1):
            if should_stop and should_stop():
                raise Cancelled("stopped")
            if cfg.objective == "ntp":
                x = sample().to(edited.device)
                loss = peft_model(input_ids=x, labels=x).loss
            else:
                loss = _distill_loss(
                    original, peft_model, pairs, cfg.tokens_per_step, rng, edited.device, targets
                )
            opt.zero_grad()
            loss.backward()
            opt.step()
            res.losses.append(float(loss.detach()))
            res.steps_done = step
            if step % every == 0 or step == cfg.steps:
                evaluate(step)
            report(progress, step, cfg.steps, f"warm-up step {step}/{cfg.steps}")
    except Cancelled:
        res.complete = False
    peft_model.eval()
    merged = peft_model.merge_and_unload()
    res.model = merged
    if out:
        with atomic_folder(out, replace=replace) as tmp:
            save_model(merged, tmp, edited.tok, {"warmup": res.to_json()}, report_name="warmup_report.json")
        res.out = str(Path(out).resolve())
    res.seconds = time.perf_counter() - t0
    return res


def _last_hidden(model: Any, x: Any, mask: Any) -> Any:
    """The last hidden states (after the final norm) of a causal LM, from its body alone: the vocabulary head's
    logits (1,024 tokens × 49k ids on SmolLM2, a fifth of its forward) are never needed by the distillation."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model: its base
    return base.base_model(input_ids=x, attention_mask=mask).last_hidden_state


def _distill_loss(
    original: Any,
    student: Any,
    pairs: list,
    tokens: int,
    rng: random.Random,
    device: str,
    targets: dict[int, Any] | None = None,
) -> Any:
    """Mean squared error between the student's and the original model's last hidden states at shared token
    boundaries, on lines drawn until `tokens` new-tokenized tokens are reached. The original model is frozen, so
    its hidden states at a line's boundaries are computed once per line and kept in `targets` (line index →
    rows), in one batched pass over the lines a step draws for the first time."""
    import torch  # noqa: PLC0415 - heavy, only for a warm-up

    targets = {} if targets is None else targets
    chosen: list[int] = []
    n = 0
    while n < tokens:
        k = rng.randrange(len(pairs))
        chosen.append(k)
        n += len(pairs[k][1])
    todo = sorted({k for k in chosen if k not in targets})
    if todo:
        xo, mo = _pad([pairs[k][0] for k in todo])
        with torch.no_grad():
            h_o = _last_hidden(original.model, xo.to(device), mo.to(device))
        for r, k in enumerate(todo):
            targets[k] = h_o[r, [p for p, _ in pairs[k][2]]].float()
    xn, mn = _pad([pairs[k][1] for k in chosen])
    h_n = _last_hidden(student, xn.to(device), mn.to(device))
    rows = [r for r, k in enumerate(chosen) for _ in pairs[k][2]]
    pn = [q for k in chosen for _, q in pairs[k][2]]
    target = torch.cat([targets[k] for k in chosen])
    got = h_n[rows, pn].float()
    return torch.nn.functional.mse_loss(got, target)
