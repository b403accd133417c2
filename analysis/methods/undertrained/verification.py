"""Verification of candidates: does the model itself fail to repeat the token?

Three repeat prompts per candidate (after Land & Bartolo, "Fishing for Magikarp", EMNLP 2024): the candidate's
id is put in place of a placeholder token, the model generates three tokens, and the highest probability it
gives the candidate decides the verdict (:func:`verdict_for`). The model is loaded by the one causal-LM loader,
:func:`analysis.model.models.load_causal_lm`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.core.progress import Progress, report
from analysis.errors import ModelLoadError, UnsupportedTokenizerError
from analysis.model.matrix import EmbeddingWeights
from analysis.model.models import load_causal_lm, pick_device
from analysis.model.source import ModelSource, resolve_model
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .roundtrip import OK, RoundTrip, decode_tokenizer, round_trip_categories

TEMPLATES: tuple[tuple[str, int, str, str, str], ...] = (
    # name, n, preamble, repeated unit, ending  ({T} = the token's text; 2n+1 times, 51 for repeats)
    (
        "input_output",
        20,
        "This device repeats its input exactly, as shown in these 100 identical trials.",
        "\nInput: «{T}»\nOutput: «{T}»",
        "\nInput: «{T}»\nOutput: «",
    ),
    (
        "assistant_explain",
        0,
        "This helpful assistant explains what a phrase means, replying with identical responses to identical "
        "questions for reliability.\nUser: What does 'edslfkj' mean?\nAssistant: 'edslfkj' has no specific "
        "meaning I am aware of.",
        "",
        "\nUser: what does '{T}' mean?\nAssistant: '",
    ),
    (
        "repeats",
        50,
        "Below is the output, as you can see it's just giving the same phrase repeated indefinitely:\n",
        "{T}",
        "{T}",
    ),
)


def verdict_for(max_prob: float, any_encodeable: bool) -> str:
    """strong/weak verified/rejected from a token's max probability over the prompts."""
    if max_prob > 0.9:
        return "strong_rejected"
    if max_prob > 0.1:
        return "weak_rejected"
    if not any_encodeable:
        return "verification_encoding_failed"
    if max_prob < 0.001:
        return "strong_verified"
    return "weak_verified"


@dataclass
class PromptResult:
    """One verification prompt for one candidate."""

    test_name: str
    encodeable: bool
    output: str
    max_prob: float


@dataclass
class Verification:
    """The verification of one candidate token."""

    id: int
    max_prob: float
    verdict: str
    prompts: list[PromptResult]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "id": self.id,
            "max_prob": self.max_prob,
            "verdict": self.verdict,
            "prompts": [p.__dict__ for p in self.prompts],
        }


def load_lm(
    src: ModelSource | str,
    weights: EmbeddingWeights | None = None,
    *,
    device: str | None = None,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[Any, Any] | None = None,
) -> tuple[Any, str]:
    """Load a causal LM for verification with :func:`analysis.model.models.load_causal_lm`; returns (model, device).

    float32 on the CPU, bfloat16 on an accelerator. With `device_map` (and `max_memory`) accelerate spreads
    the model over devices and the returned device is where input ids go. Refuses models without LM head
    weights: their logits would come from a random matrix.
    """
    src = src if isinstance(src, ModelSource) else resolve_model(src)
    if weights is not None and not weights.has_lm_head:
        archs = ", ".join(weights.config.get("architectures") or []) or "unknown architecture"
        raise ModelLoadError(
            f"{src.label} has no LM head ({archs}): verification is not possible (the indicators still work)"
        )
    import torch  # noqa: PLC0415 - heavy, only when a model is loaded

    if device_map is None:
        device = pick_device(device)
        on_cpu = device == "cpu"
    else:
        on_cpu = not torch.cuda.is_available()
    dtype = torch.float32 if on_cpu else torch.bfloat16
    try:
        lm = load_causal_lm(src, dtype=dtype, device=device, device_map=device_map, max_memory=max_memory)
    except ModelLoadError as e:
        raise ModelLoadError(f"{e}: verification is not possible (the indicators still work)") from e
    missing = [k for k in lm.missing_keys if "lm_head" in k or "embed_out" in k]
    if missing and not getattr(lm.model.config, "tie_word_embeddings", False):
        raise ModelLoadError(
            f"{src.label}: the checkpoint has no LM head weights ({missing[0]}): verification is not possible"
        )
    return lm.model, lm.device


class Verifier:
    """Runs the three verification prompts for candidate ids, batched, on one device."""

    def __init__(
        self, model: Any, tok: LoadedTokenizer, *, device: str = "cpu", round_trip: RoundTrip | None = None
    ) -> None:
        self.model = model
        self.tok = tok
        self.device = device
        self.tk = decode_tokenizer(tok)
        self.rt = round_trip or round_trip_categories(tok)
        self.placeholder, self.prompts = self._build_prompts()

    def _placeholder_candidates(self) -> list[int]:
        ids = []
        for i, c in enumerate(self.rt.categories):
            if c != OK:
                continue
            s = self.rt.decoded[i]
            if s.isascii() and s.isalpha():
                ids.append(i)
        ids.sort(key=lambda i: (-len(set(self.rt.decoded[i])), -len(self.rt.decoded[i]), i))
        return ids

    def _build_prompts(self) -> tuple[int, list[tuple[str, list[int]]]]:
        tk = self.tk
        for p in self._placeholder_candidates()[:5000]:
            if tk.encode(tk.decode([p, p], skip_special_tokens=False), add_special_tokens=False).ids != [
                p,
                p,
            ]:
                continue
            text = self.rt.decoded[p]
            prompts = []
            for name, n, pre, unit, end in TEMPLATES:
                s = pre + unit.replace("{T}", text) * n + end.replace("{T}", text)
                ids = tk.encode(s, add_special_tokens=True).ids
                if ids.count(p) != unit.count("{T}") * n + end.count("{T}"):
                    break
                prompts.append((name, ids))
            else:
                return p, prompts
        raise UnsupportedTokenizerError(
            f"{self.tok.name}: found no placeholder token whose prompts re-encode exactly; cannot verify"
        )

    def _run_batch(self, ids: list[int], prompt: list[int], p: int) -> tuple[np.ndarray, list[list[int]]]:
        import torch  # noqa: PLC0415 - heavy, only when a model runs

        base = torch.tensor(prompt, dtype=torch.long)
        mask = base == p
        x = base.repeat(len(ids), 1)
        cand = torch.tensor(ids, dtype=torch.long)
        x[:, mask] = cand[:, None]
        x = x.to(self.device)
        probs = np.zeros((len(ids), 3), dtype=np.float64)
        gen: list[list[int]] = [[] for _ in ids]
        with torch.inference_mode():
            out = self._forward(input_ids=x, use_cache=True)
            for step in range(3):
                # with a device_map the logits come out where the last layer runs: index them there
                logits = out.logits[:, -1, :].float()
                pr = torch.softmax(logits, dim=-1)
                if int(cand.max()) < pr.shape[1]:
                    at = torch.arange(len(ids), device=pr.device)
                    probs[:, step] = pr[at, cand.to(pr.device)].double().cpu().numpy()
                nxt = logits.argmax(dim=-1)
                for r, t in enumerate(nxt.tolist()):
                    gen[r].append(t)
                if step < 2:
                    out = self._forward(
                        input_ids=nxt[:, None].to(self.device),
                        past_key_values=out.past_key_values,
                        use_cache=True,
                    )
        return probs, gen

    def _forward(self, **kw: Any) -> Any:
        """One forward pass keeping only the last position's logits when the model supports it."""
        try:
            return self.model(logits_to_keep=1, **kw)
        except TypeError:
            return self.model(**kw)

    def _encodeable(self, prompt: list[int], p: int, cid: int) -> bool:
        ids = [cid if t == p else t for t in prompt]
        text = self.tk.decode(ids, skip_special_tokens=False)
        return cid in self.tk.encode(text, add_special_tokens=False).ids

    def verify(
        self,
        ids: list[int],
        *,
        batch_size: int = 8,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_result: Callable[[Verification], None] | None = None,
    ) -> list[Verification]:
        """Verify candidates in batches; stops early (keeping finished results) when `should_stop()` is true.
        `on_result` receives each finished verification at once (so an interrupted run keeps them)."""
        results: list[Verification] = []
        total = len(ids)
        report(progress, 0, total, "candidates verified")
        for s in range(0, total, batch_size):
            if should_stop and should_stop():
                break
            chunk = [int(i) for i in ids[s : s + batch_size]]
            per: list[list[PromptResult]] = [[] for _ in chunk]
            for name, prompt in self.prompts:
                probs, gen = self._run_batch(chunk, prompt, self.placeholder)
                for r, cid in enumerate(chunk):
                    per[r].append(
                        PromptResult(
                            name,
                            self._encodeable(prompt, self.placeholder, cid),
                            self.tk.decode(gen[r], skip_special_tokens=False),
                            float(probs[r].max()),
                        )
                    )
            for r, cid in enumerate(chunk):
                mp = max(p.max_prob for p in per[r])
                results.append(
                    Verification(cid, mp, verdict_for(mp, any(p.encodeable for p in per[r])), per[r])
                )
                if on_result:
                    on_result(results[-1])
            report(progress, len(results), total, "candidates verified")
        return results
