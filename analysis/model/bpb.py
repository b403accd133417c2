"""Bits per byte of a causal LM with its tokenizer: Σ −log₂ p(token | context) over the tokens of a text ÷ the
UTF-8 bytes of that text.

Two (model, tokenizer) pairs compare fairly only on the same bytes, so every budget here is in lines (documents)
or bytes, never in tokens: a tokenizer that compresses better sees the same text in fewer tokens.

* **The first token.** Every line is scored from a one-token prefix: the BOS token the tokenizer adds itself
  (its post-processor), else the model config's ``bos_token_id``, else its ``eos_token_id``
  (:func:`prefix_token`; the choice is stated in every result). The prefix is context, never scored.
* **Long lines.** A line longer than `window` tokens is read in windows of `window` tokens that start every
  `stride` tokens (the sliding window of the transformers perplexity guide); each token is scored once, in the
  first window that reaches it, with at least ``window − stride`` tokens of context after the first window.
* **Batches.** Segments are sorted by length and packed into batches of at most `batch_tokens` padded positions
  (right padding + attention mask); the log-softmax is taken in float32. On a CUDA device the attention kernels
  are those of :data:`CUDA_SDPA`.

:func:`iter_scored` is the one forward loop (also used by :mod:`analysis.evaluate.comparison`, which takes the LM head's
input from it to score the edited model's head on the original's hidden states); :func:`bits_per_byte` reduces it
to one figure. CPU passes use one intra-op thread per core this process may use (:func:`cpu_threads`).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.measure import fast_encode
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Default window (tokens per forward pass of one line) and stride of the sliding window.
WINDOW = 1024
STRIDE = 512
#: Default budget of one batch: padded positions × vocabulary rows of float32 logits (≈ 600 MB).
LOGIT_BUDGET = 150_000_000
#: On a GPU the budget grows up to this many times :data:`LOGIT_BUDGET` (:func:`gpu_logit_budget`).
GPU_BUDGET_SCALE = 4
#: The attention kernels a forward pass on a CUDA device may use (names of ``torch.nn.attention.SDPBackend``
#: members; None: PyTorch's own choice). The check's batches come in many shapes (lengths × rows), and cuDNN's
#: attention builds an execution graph for every new shape it sees, so it is left out.
CUDA_SDPA: tuple[str, ...] | None = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
LN2 = math.log(2.0)


@dataclass(frozen=True)
class Prefix:
    """The token every line is conditioned on, and why it was chosen."""

    id: int
    token: str
    source: str  # "tokenizer BOS" | "config bos_token_id" | "config eos_token_id"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {"id": self.id, "token": self.token, "source": self.source}


def prefix_token(tok: LoadedTokenizer, config: Any) -> Prefix:
    """The BOS the tokenizer adds (its post-processor puts one before the text), else the model config's
    ``bos_token_id``, else its ``eos_token_id``; DataError when there is none."""
    probe = "a"
    with_special = tok.tokenizer.encode(probe, add_special_tokens=True).ids
    plain = tok.tokenizer.encode(probe, add_special_tokens=False).ids
    if len(with_special) > len(plain) and with_special[len(with_special) - len(plain) :] == plain:
        i = with_special[0]
        return Prefix(i, tok.id_to_token.get(i, str(i)), "tokenizer BOS")
    for key in ("bos_token_id", "eos_token_id"):
        v = getattr(config, key, None)
        if isinstance(v, list):
            v = v[0] if v else None
        if isinstance(v, int) and v in tok.id_to_token:
            return Prefix(v, tok.id_to_token[v], f"config {key}")
    raise DataError(
        f"{tok.name}: the tokenizer adds no BOS and the model config names no bos/eos token: "
        "nothing to condition the first token on"
    )


@dataclass(frozen=True)
class Segment:
    """One forward pass over part of one line: `ids` (the line's sequence from `offset`), scoring the
    predictions at positions `first` … len(ids) − 2 (targets ``ids[first + 1:]``)."""

    doc: int
    offset: int
    ids: tuple[int, ...]
    first: int

    @property
    def targets(self) -> tuple[int, ...]:
        """The token ids this segment scores."""
        return self.ids[self.first + 1 :]

    @property
    def target_positions(self) -> range:
        """Where the targets sit in the line's whole sequence (the prefix is position 0)."""
        return range(self.offset + self.first + 1, self.offset + len(self.ids))


def segments(seqs: Sequence[Sequence[int]], *, window: int = WINDOW, stride: int = STRIDE) -> list[Segment]:
    """Cut each sequence (prefix + tokens) into sliding windows of at most `window` tokens, starting every
    `stride` tokens, so that each token after the prefix is scored exactly once."""
    if window < 2:
        raise DataError("the window must hold at least 2 tokens")
    if not 0 < stride <= window - 1:
        raise DataError(f"the stride must be between 1 and window − 1 ({window - 1}), not {stride}")
    out: list[Segment] = []
    for d, seq in enumerate(seqs):
        seq = tuple(int(i) for i in seq)
        if len(seq) < 2:
            continue
        if len(seq) <= window:
            out.append(Segment(d, 0, seq, 0))
            continue
        scored_to = 0  # the last position whose token is scored
        start = 0
        while scored_to < len(seq) - 1:
            end = min(start + window, len(seq))
            out.append(Segment(d, start, seq[start:end], scored_to - start))
            scored_to = end - 1
            start += stride
    return out


def batches(segs: Sequence[Segment], max_tokens: int) -> list[list[Segment]]:
    """Segments grouped by similar length into batches of at most `max_tokens` padded positions."""
    order = sorted(segs, key=lambda s: len(s.ids))
    out: list[list[Segment]] = []
    cur: list[Segment] = []
    for s in order:
        width = max(len(s.ids), max((len(c.ids) for c in cur), default=0))
        if cur and width * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur = []
        cur.append(s)
    if cur:
        out.append(cur)
    return out


def rows_of(module: Any) -> int:
    """Rows of an embedding or LM head module (also when peft wraps it: its base layer's weight)."""
    weight = getattr(module, "weight", None)
    if weight is None and hasattr(module, "base_layer"):
        weight = module.base_layer.weight
    if weight is None:
        raise DataError(f"{type(module).__name__} has no weight matrix")
    return int(weight.shape[0])


def gpu_logit_budget(free_bytes: int) -> int:
    """The logit budget of one batch on a GPU with `free_bytes` free: a tenth of the free memory at 6 bytes per
    logit (the model's bf16 logits and their float32 copy), between :data:`LOGIT_BUDGET` and
    :data:`GPU_BUDGET_SCALE` times it (fewer, fuller batches: less launch and loop overhead per token)."""
    return max(LOGIT_BUDGET, min(GPU_BUDGET_SCALE * LOGIT_BUDGET, free_bytes // 60))


def logit_budget_for(model: Any) -> int:
    """:data:`LOGIT_BUDGET` for a model in CPU memory; :func:`gpu_logit_budget` of the free memory of the GPU
    that holds its first parameter."""
    param = next(iter(model.parameters()), None)
    if param is None or param.device.type != "cuda":
        return LOGIT_BUDGET
    import torch  # noqa: PLC0415 - heavy, only when a model runs

    free, _total = torch.cuda.mem_get_info(param.device)
    return gpu_logit_budget(int(free))


def batch_tokens_for(model: Any, logit_budget: int | None = None) -> int:
    """Padded positions per batch so that the float32 logits stay within `logit_budget` elements (default
    :func:`logit_budget_for` the model's device)."""
    vocab = rows_of(model.get_output_embeddings())
    budget = logit_budget if logit_budget is not None else logit_budget_for(model)
    return max(64, budget // max(vocab, 1))


def attention_kernels(device: str) -> contextlib.AbstractContextManager:
    """A context that limits ``scaled_dot_product_attention`` to :data:`CUDA_SDPA` on a CUDA `device` (nothing
    elsewhere, or when it is None)."""
    if not str(device).startswith("cuda") or CUDA_SDPA is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 - heavy, only when a model runs

    return sdpa_kernel([getattr(SDPBackend, name) for name in CUDA_SDPA])


def cpu_threads() -> int:
    """Intra-op threads for CPU forward passes: torch's default (one per physical core) capped by the cores this
    process may run on (a container or `taskset` limit), so that threads never outnumber the cores; returns it."""
    import torch  # noqa: PLC0415 - heavy, only when a model runs

    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        allowed = os.cpu_count() or 1
    n = max(1, min(torch.get_num_threads(), allowed))
    if n != torch.get_num_threads():
        torch.set_num_threads(n)
    return n


@dataclass
class Scored:
    """One segment's scored predictions: log-probabilities (one row per target, one column per vocabulary row),
    the log-partition of each row's raw logits (``logits = logp + lse``), the target ids (a tensor on the same
    device: no host-to-device copy per segment), and the LM head's input there (the final hidden state) when
    asked for."""

    seg: Segment
    logp: Any
    lse: Any
    hidden: Any = None
    targets: Any = None


class HeadInput:
    """A forward hook on the LM head that keeps its input (the final hidden states of the batch)."""

    def __init__(self, model: Any) -> None:
        self.value: Any = None
        self._handle = model.get_output_embeddings().register_forward_hook(self._keep)

    def _keep(self, _module: Any, args: tuple, _output: Any) -> None:
        self.value = args[0]

    def remove(self) -> None:
        """Detach the hook."""
        self._handle.remove()


def iter_scored(
    model: Any,
    segs: Sequence[Segment],
    *,
    device: str = "cpu",
    batch_tokens: int | None = None,
    hidden: bool = False,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[Scored]:
    """One batched forward loop over `segs` (padded, masked, sorted by length): a :class:`Scored` per segment,
    batch by batch (order of the batches, not of `segs`). With `hidden`, the LM head's input at the scored
    positions comes along (a forward hook; what lets :mod:`analysis.evaluate.comparison` apply another head to the same
    states without another forward pass). `should_stop()` is checked between batches (the iteration simply
    ends); `progress` counts segments."""
    import torch  # noqa: PLC0415 - heavy, only when a model runs

    if device == "cpu":
        cpu_threads()
    groups = batches(segs, batch_tokens or batch_tokens_for(model))
    done = 0
    report(progress, 0, len(segs), "segments scored")
    hook = HeadInput(model) if hidden else None
    try:
        for group in groups:
            if should_stop and should_stop():
                return
            width = max(len(s.ids) for s in group)
            x = torch.zeros((len(group), width), dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for r, s in enumerate(group):
                x[r, : len(s.ids)] = torch.as_tensor(s.ids)
                mask[r, : len(s.ids)] = 1
            with torch.inference_mode():
                xd = x.to(device)
                with attention_kernels(device):
                    logits = model(input_ids=xd, attention_mask=mask.to(device)).logits.float()
                lse = torch.logsumexp(logits, dim=-1, keepdim=True)
                logp = logits.sub_(lse)  # in place: one float32 copy of the batch's logits (padding included)
                xd = xd.to(logp.device)
                h = hook.value if hook is not None else None
                for r, s in enumerate(group):
                    rows = slice(s.first, len(s.ids) - 1)
                    yield Scored(s, logp[r, rows], lse[r, rows, 0], None if h is None else h[r, rows],
                                 xd[r, s.first + 1 : len(s.ids)])  # fmt: skip
            del logits, logp, lse, h, xd
            done += len(group)
            report(progress, done, len(segs), "segments scored")
    finally:
        if hook is not None:
            hook.remove()


def iter_logprobs(
    model: Any,
    segs: Sequence[Segment],
    *,
    device: str = "cpu",
    batch_tokens: int | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[tuple[Segment, Any]]:
    """Yield (segment, float32 log-probabilities of its scored predictions: one row per target, one column per
    vocabulary id) for every segment (:func:`iter_scored` without the extras)."""
    for sc in iter_scored(model, segs, device=device, batch_tokens=batch_tokens, progress=progress,
                          should_stop=should_stop):  # fmt: skip
        yield sc.seg, sc.logp


@dataclass
class BitsPerByte:
    """Bits per byte of one (model, tokenizer) pair on one set of lines."""

    bits: float
    bytes: int
    tokens: int
    lines: int
    prefix: Prefix
    window: int
    stride: int

    @property
    def bpb(self) -> float:
        """Σ −log₂ p ÷ UTF-8 bytes."""
        return self.bits / self.bytes if self.bytes else float("nan")

    @property
    def tokens_per_byte(self) -> float:
        """Tokens (without the prefix) ÷ UTF-8 bytes."""
        return self.tokens / self.bytes if self.bytes else float("nan")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "bpb": self.bpb,
            "bits": self.bits,
            "bytes": self.bytes,
            "tokens": self.tokens,
            "tokens_per_byte": self.tokens_per_byte,
            "lines": self.lines,
            "prefix": self.prefix.to_json(),
            "window": self.window,
            "stride": self.stride,
        }


def encode_lines(tok: LoadedTokenizer, lines: Sequence[str], prefix: Prefix) -> list[list[int]]:
    """prefix + the tokenizer's ids (no special tokens added) of every line."""
    if tok.dropout:  # BPE dropout: the check samples a segmentation with the tokenizer as it is
        return [
            [prefix.id, *e.ids]
            for e in tok.tokenizer.encode_batch_fast(list(lines), add_special_tokens=False)
        ]
    flat, lens = fast_encode.encode_ids(tok, lines)  # gigatoken where verified identical, else tokenizers
    ids, ends = flat.tolist(), np.cumsum(lens).tolist()
    return [[prefix.id, *ids[e - n : e]] for e, n in zip(ends, lens.tolist())]


def check_vocab(model: Any, tok: LoadedTokenizer, label: str = "the model") -> None:
    """DataError when the tokenizer has ids the model's embedding matrix or LM head has no row for."""
    top = max(tok.id_to_token) + 1
    emb = rows_of(model.get_input_embeddings())
    head = model.get_output_embeddings()
    rows = min(emb, rows_of(head)) if head is not None else emb
    if top > rows:
        raise DataError(
            f"{label} has {rows:,} embedding rows but its tokenizer {tok.name} has ids up to {top - 1:,}: "
            "is this the model's own tokenizer?"
        )


def bits_per_byte(
    model: Any,
    tok: LoadedTokenizer,
    lines: Sequence[str],
    *,
    device: str = "cpu",
    window: int = WINDOW,
    stride: int = STRIDE,
    batch_tokens: int | None = None,
    progress: Progress | None = None,
) -> BitsPerByte:
    """Bits per byte of `model` reading `lines` tokenized by `tok` (each line conditioned on
    :func:`prefix_token`, long lines in sliding windows)."""
    import torch  # noqa: PLC0415 - heavy, only when a model runs

    check_vocab(model, tok)
    prefix = prefix_token(tok, model.config)
    seqs = encode_lines(tok, lines, prefix)
    terms = []  # each segment's −Σ ln p, a tensor on the model's device: summed after the loop, one transfer
    for sc in iter_scored(
        model, segments(seqs, window=window, stride=stride), device=device, batch_tokens=batch_tokens,
        progress=progress,
    ):  # fmt: skip
        terms.append(sc.logp.gather(1, sc.targets[:, None]).double().sum())
    nats = -float(torch.stack(terms).sum()) if terms else 0.0
    return BitsPerByte(
        bits=nats / LN2,
        bytes=sum(len(s.encode("utf-8")) for s in lines),
        tokens=sum(len(s) - 1 for s in seqs),
        lines=len(lines),
        prefix=prefix,
        window=window,
        stride=stride,
    )
