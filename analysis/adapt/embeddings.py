"""Carry a model's embeddings along when its tokenizer changes (pruning, extension).

Given an old → new id map, the new input embedding and LM head rows are copied from the old ones; rows of
new tokens are initialised by FVT (:mod:`analysis.adapt.fvt`: the mean of the old rows of the token's pieces under
the OLD tokenizer), by the mean of all old rows, by a multivariate normal with the mean and covariance of the
old rows (as Kim, *Exploring the Effects of Tokenizer Extension on Domain-specific Finetuning of Language
Models*, MA thesis, Seoul National University, 2025, initialises extended vocabularies), or randomly (the
model's init std). `config.vocab_size` and the special-token ids in the config are updated; tied weights stay
tied.

Models load through the one causal-LM loader, :func:`analysis.model.models.load_causal_lm` (safetensors, `.bin`
through `torch.load(weights_only=True)`, GGUF de-quantized; never remote code).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError

from analysis.bpe import bare_tokenize_fn
from analysis.core.outputs import give_file_modes
from analysis.core.progress import Progress
from analysis.errors import DataError, ModelLoadError
from analysis.model.bpb import prefix_token
from analysis.model.config_files import write_accepted_forms
from analysis.model.models import load_causal_lm
from analysis.tokenizer.export import folder_files, write_files
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .fvt import fvt_pieces, fvt_rows
from .omp import DEFAULT_ANCHORS, DEFAULT_K, SPACES, anchor_ids, code_rows, hidden_space_rows

INITS = ("fvt", "mean", "mvn", "random", "omp")
#: What each init does, for help texts and the pages.
INIT_HELP = {
    "fvt": "FVT: the mean of the rows of the token's pieces under the original tokenizer",
    "mean": "the mean of all original rows",
    "mvn": "multivariate normal with the mean and covariance of the original rows (Kim 2025)",
    "random": "normal noise with the model's initializer_range (the legacy default)",
    "omp": "orthogonal matching pursuit (Goddard & Fernandes Neto 2025): the token's donor vector coded over k = 64 "
    "shared tokens' (a donor model's rows; without one, the original's FVT vector over its own rows), the codes "
    "applied to the original's rows of those tokens",
}


# --------------------------------------------------------------------------------------------------
# Loading / saving
# --------------------------------------------------------------------------------------------------
def write_failure(e: BaseException) -> OSError:
    """A library's failure to write (safetensors' `SafetensorError` wrapping the system's error) as the OSError it
    stands for, so that the output layer reports it as any other write failure ("No space left on device")."""
    text = str(e)
    code = next((c for c, words in _IO_CODES if any(w in text for w in words)), errno.EIO)
    return OSError(code, os.strerror(code) if code != errno.EIO else f"{os.strerror(code)} ({text[:200]})")


_IO_CODES = (
    (errno.ENOSPC, ("os error 28", "code: 28", "StorageFull", "No space left")),
    (errno.EDQUOT, ("os error 122", "code: 122", "QuotaExceeded", "Disk quota exceeded")),
    (errno.EACCES, ("os error 13", "code: 13", "PermissionDenied", "Permission denied")),
    (errno.EROFS, ("os error 30", "code: 30", "ReadOnlyFilesystem", "Read-only file system")),
)


def load_model(source: str | os.PathLike, *, revision: str | None = None, token: str | None = None) -> Any:
    """A causal LM (on the CPU, in its stored dtype) from a folder, a weight file, a GGUF file or a hub id."""
    return load_causal_lm(source, revision=revision, token=token).model


def save_model(
    model: Any,
    out_dir: str | os.PathLike,
    tokenizer: LoadedTokenizer | None = None,
    report: dict | None = None,
    *,
    report_name: str = "prune_report.json",
) -> Path:
    """Write the model as safetensors (+ the tokenizer folder and `report_name`, when given) into out_dir.

    Writes in place: callers that need an atomic output pass the temporary folder of
    :func:`analysis.core.outputs.atomic_folder` (as `prune --out` and the Prune page do).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        model.save_pretrained(str(out), safe_serialization=True)
    except SafetensorError as e:  # safetensors' own I/O failures (a full disk) are not OSErrors
        raise write_failure(e) from e
    give_file_modes(out)  # model.safetensors comes 0600 out of save_pretrained, every other output file 0644
    write_accepted_forms(
        out
    )  # the forms every reader accepts (eos list, torch_dtype): see analysis.evaluate.preflight
    if tokenizer is not None:
        files = folder_files(tokenizer, report, base_config=tokenizer.config, report_name=report_name)
        write_files(out, files)
    return out


# --------------------------------------------------------------------------------------------------
# Id maps
# --------------------------------------------------------------------------------------------------
def id_map_by_string(old_tok: LoadedTokenizer, new_tok: LoadedTokenizer) -> dict[int, int]:
    """old id → new id for every token string (model vocab and added tokens) present in both tokenizers."""
    new_ids = {s: i for i, s in new_tok.id_to_token.items()}
    return {o: new_ids[s] for o, s in old_tok.id_to_token.items() if s in new_ids}


# --------------------------------------------------------------------------------------------------
# Remapping
# --------------------------------------------------------------------------------------------------
@dataclass
class RemapReport:
    """What `remap_embeddings` did."""

    old_rows: int
    new_rows: int
    copied: int
    initialised: int
    init: str
    tied: bool
    has_lm_head: bool
    #: new id → old ids averaged (FVT) for every initialised row
    pieces: dict[int, list[int]] = field(default_factory=dict)
    #: config token ids that pointed at removed tokens (set to None)
    dropped_config_ids: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        """JSON-friendly summary (pieces truncated to 50 entries)."""
        d = {k: v for k, v in self.__dict__.items() if k != "pieces"}
        d["pieces_sample"] = {int(k): v for k, v in list(self.pieces.items())[:50]}
        return d


def remap_embeddings(
    model: Any,
    old_tok: LoadedTokenizer,
    new_tok: LoadedTokenizer,
    id_map: Mapping[int, int] | None = None,
    init: str = "fvt",
    *,
    seed: int = 0,
) -> RemapReport:
    """Make `model` (changed in place) follow the new tokenizer: rows moved by `id_map` (old → new).

    New ids not reached by the map are initialised with `init`: "fvt" (mean of the old rows of the
    token's pieces under the old tokenizer; falls back to the mean row when it has no pieces), "mean"
    (mean of all old token rows), "mvn" (samples of a multivariate normal with the mean and covariance of the
    old token rows; :func:`mvn_rows`), "random" (normal, std = config.initializer_range) or "omp" (the token's
    hidden state coded over anchor tokens' hidden states by orthogonal matching pursuit, the codes applied to
    the anchors' rows: :mod:`analysis.adapt.omp`). Without an id map, tokens are matched by string. The LM head follows the same map (and its bias, if any); tied weights
    stay tied; config.vocab_size and the bos/eos/pad ids in the config are updated.
    """
    import torch  # noqa: PLC0415 - heavy, only when a model is remapped

    if init not in INITS:
        raise DataError(f"unknown embedding init {init!r}; choose one of {', '.join(INITS)}")
    if id_map is None:
        id_map = id_map_by_string(old_tok, new_tok)
    emb = model.get_input_embeddings()
    if emb is None or not hasattr(emb, "weight"):
        raise ModelLoadError("the model has no input embedding matrix")
    head = model.get_output_embeddings()
    has_head = head is not None and hasattr(head, "weight")
    tied = bool(has_head and head.weight is emb.weight) or (
        has_head and head.weight.data_ptr() == emb.weight.data_ptr()
    )
    e_old = emb.weight.detach().clone()
    w_old = head.weight.detach().clone() if has_head and not tied else None
    b_old = head.bias.detach().clone() if has_head and getattr(head, "bias", None) is not None else None
    n_old = e_old.shape[0]
    n_new = max(new_tok.id_to_token) + 1
    if max(old_tok.id_to_token) + 1 > n_old:
        raise DataError(
            f"the old tokenizer has ids up to {max(old_tok.id_to_token)} but the model only {n_old} embedding rows; "
            "is this the model's own tokenizer?"
        )
    src = np.full(n_new, -1, dtype=np.int64)
    for o, n in id_map.items():
        if 0 <= n < n_new and 0 <= o < n_old:
            src[n] = o
    missing = np.flatnonzero(src < 0).tolist()

    def fill(mat_old: torch.Tensor | None) -> torch.Tensor | None:
        if mat_old is None:
            return None
        idx = torch.as_tensor(np.where(src >= 0, src, 0))
        new = mat_old[idx].clone()
        return new

    e_new = fill(e_old)
    w_new = fill(w_old)
    b_new = fill(b_old)
    pieces: dict[int, list[int]] = {}
    if missing:
        std = float(getattr(model.config, "initializer_range", None) or 0.02)
        rows_e, rows_w, rows_b, pieces = init_rows(
            e_old, w_old, b_old, old_tok, new_tok, missing, init, seed=seed, std=std, model=model
        )
        rows = torch.as_tensor(missing)
        e_new[rows] = rows_e.to(e_new.dtype)
        if w_new is not None:
            w_new[rows] = rows_w.to(w_new.dtype)
        if b_new is not None:
            b_new[rows] = rows_b.to(b_new.dtype)
    install_rows(model, e_new, w_new, b_new, tied, has_head)
    dropped = _remap_config_ids(model, id_map)
    return RemapReport(
        old_rows=n_old,
        new_rows=n_new,
        copied=int((src >= 0).sum()),
        initialised=len(missing),
        init=init,
        tied=tied,
        has_lm_head=bool(has_head),
        pieces=pieces,
        dropped_config_ids=dropped,
    )


def init_rows(
    e_old: Any,
    w_old: Any,
    b_old: Any,
    old_tok: LoadedTokenizer,
    new_tok: LoadedTokenizer,
    missing: list[int],
    init: str,
    *,
    seed: int = 0,
    std: float = 0.02,
    omp_k: int = DEFAULT_K,
    model: Any = None,
    pieces: Mapping[int, list[int]] | None = None,
    omp_anchors: Sequence[int] | None = None,
    omp_layer: int | None = None,
    omp_candidates: int | None = None,
    omp_space: str = "embed",
    omp_anchor_count: int = DEFAULT_ANCHORS,
    progress: Progress | None = None,
) -> tuple[Any, Any, Any, dict[int, list[int]]]:
    """Rows for the new ids `missing` of `new_tok` from the old matrices (input `e_old`, untied output `w_old`
    or None, output bias `b_old` or None): (input rows, output rows or None, bias values or None, FVT pieces).

    `init` is one of :data:`INITS` (see :data:`INIT_HELP`). "omp" codes each token over `omp_k` anchors (the
    first `omp_anchor_count` of `omp_anchors`, default the original's ids; atoms screened
    to `omp_candidates`) in the shared space `omp_space` (:mod:`analysis.adapt.omp`): "embed" codes the token's
    FVT row over the anchors' rows of the same matrix (input and untied output each), the rows of every token's
    FVT pieces joined to the anchors (:func:`pieces_outside`); "hidden" codes its hidden
    state at layer `omp_layer` of the ORIGINAL `model` (its FVT pieces read by the model) over the anchors'
    (:func:`analysis.adapt.omp.hidden_space_rows`), the codes applied to the anchors' rows.

    `pieces` (new id → original ids) replaces the FVT pieces found from `new_tok`'s token strings: a caller whose
    two vocabularies spell tokens differently (a transplant) gives the original tokenizer's reading itself.
    """
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    if init not in INITS:
        raise DataError(f"unknown embedding init {init!r}; choose one of {', '.join(INITS)}")
    n_old = e_old.shape[0]
    n_old_tok = min(max(old_tok.id_to_token) + 1, n_old)
    old_rows = e_old[:n_old_tok]
    mean_e = old_rows.float().mean(0)
    mean_w = w_old[:n_old_tok].float().mean(0) if w_old is not None else None
    mean_b = b_old[:n_old_tok].float().mean() if b_old is not None else None
    k = len(missing)
    given = pieces
    pieces = {}
    rows_w = rows_b = None
    if init in ("fvt", "omp"):  # no pieces → the mean row
        tokenize = bare_tokenize_fn(old_tok) if given is None else None
        for j in missing:
            if given is not None:
                ids = list(given.get(j, []))
            else:
                s = new_tok.id_to_token.get(j)
                ids = (
                    []
                    if s is None
                    else fvt_pieces(old_tok, s, text=s not in new_tok.vocab, tokenize=tokenize)
                )
            pieces[j] = [i for i in ids if 0 <= i < n_old]
        plist = [pieces[j] for j in missing]
        rows_e = fvt_rows(e_old, plist, mean_e)
        if w_old is not None:
            rows_w = fvt_rows(w_old, plist, mean_w)
        if b_old is not None:
            rows_b = fvt_rows(b_old, plist, mean_b)
        if init == "omp" and omp_space == "embed":
            specials = set(old_tok.added_ids)
            anchors = anchor_ids(n_old_tok, omp_anchors, specials, omp_anchor_count)
            if len(anchors) < 1:
                raise DataError("OMP needs at least one anchor token; the vocabularies share none")
            anchors += pieces_outside(plist, anchors, n_old_tok, specials)
            keep = piece_positions(plist, anchors)
            sel = torch.as_tensor(anchors)
            e_a = e_old[sel].float()
            rows_e = code_rows(e_a, rows_e.float(), [e_a], k=omp_k, candidates=omp_candidates, keep=keep,
                               progress=progress)[0]  # fmt: skip
            if w_old is not None:
                w_a = w_old[sel].float()
                rows_w = code_rows(w_a, rows_w.float(), [w_a], k=omp_k, candidates=omp_candidates, keep=keep)[
                    0
                ]
        elif init == "omp":
            if omp_space not in SPACES:
                raise DataError(f"unknown OMP space {omp_space!r}; choose one of {', '.join(SPACES)}")
            if model is None:
                raise DataError("the omp init in hidden space reads the original model: pass it")
            mats = [e_old[:n_old_tok]] + ([w_old[:n_old_tok]] if w_old is not None else [])
            prefix = prefix_token(old_tok, model.config).id
            coded = hidden_space_rows(model, mats, plist, prefix, exclude=set(old_tok.added_ids), k=omp_k,
                                      anchor_ids=omp_anchors, anchors=omp_anchor_count, layer=omp_layer, candidates=omp_candidates,
                                      progress=progress)  # fmt: skip
            rows_e = coded[0]
            if w_old is not None:
                rows_w = coded[1]
    elif init == "mvn":
        gen = torch.Generator().manual_seed(seed)
        rows_e = mvn_rows(old_rows, k, gen)
        if w_old is not None:
            rows_w = mvn_rows(w_old[:n_old_tok], k, gen)
        if b_old is not None:
            rows_b = mean_b.expand(k)
    elif init == "random":
        gen = torch.Generator().manual_seed(seed)
        rows_e = torch.empty((k, e_old.shape[1]))
        rows_w = torch.empty((k, w_old.shape[1])) if w_old is not None else None
        for r in range(k):
            rows_e[r] = torch.randn(e_old.shape[1], generator=gen) * std
            if rows_w is not None:
                rows_w[r] = torch.randn(w_old.shape[1], generator=gen) * std
        rows_b = torch.zeros(k) if b_old is not None else None
    else:  # mean
        rows_e = mean_e.expand(k, -1)
        rows_w = mean_w.expand(k, -1) if w_old is not None else None
        rows_b = mean_b.expand(k) if b_old is not None else None
    return rows_e, rows_w, rows_b, pieces


def pieces_outside(
    pieces: Sequence[Sequence[int]], anchors: Sequence[int], n_rows: int, exclude: set[int]
) -> list[int]:
    """The ids of `pieces` (rows below `n_rows`, not in `exclude`) that the dictionary `anchors` lacks, in id order.

    Without a donor, OMP codes a token's FVT row — the mean of its pieces' rows — over the dictionary and applies
    the code to the same rows, so the best it can give is that FVT row, and it can only give it when the pieces'
    rows are atoms. The first 8,192 shared tokens lacked a piece of 51 % of Qwen3's new ASCII tokens and 73 % of
    its new CJK ones for SmolLM2 (their OMP rows were 38 % off the target, the others 0.6 %): the dictionary
    gets every piece."""
    have = set(anchors)
    return sorted(
        {int(i) for ps in pieces for i in ps if 0 <= i < n_rows and i not in have and i not in exclude}
    )


def piece_positions(pieces: Sequence[Sequence[int]], anchors: Sequence[int]) -> Any:
    """Where each token's pieces sit in the dictionary `anchors` (tokens × most pieces, −1 = none): OMP's
    screening keeps them among the token's candidates (:func:`analysis.adapt.omp.omp`), so that a token read as
    many pieces, each weakly correlated with their mean, is still coded over them."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    at = {int(a): i for i, a in enumerate(anchors)}
    found = [[at[i] for i in dict.fromkeys(ps) if i in at] for ps in pieces]
    out = torch.full((len(found), max((len(f) for f in found), default=0)), -1, dtype=torch.long)
    for r, f in enumerate(found):
        out[r, : len(f)] = torch.as_tensor(f, dtype=torch.long)
    return out


def mvn_rows(rows: Any, k: int, generator: Any = None) -> Any:
    """`k` samples of the multivariate normal with the mean and (sample) covariance of `rows` (a 2-D tensor).

    The covariance is factorised by its eigen-decomposition (negative eigenvalues from rounding are set to 0), so
    a singular covariance (fewer rows than dimensions, collinear rows) still gives samples inside its span.
    Returns a float32 tensor of shape (k, dim).
    """
    import torch  # noqa: PLC0415 - heavy, only when a model is remapped

    x = rows.detach().float()
    mu = x.mean(0)
    centred = x - mu
    cov = (centred.T @ centred).double() / max(x.shape[0] - 1, 1)
    vals, vecs = torch.linalg.eigh(cov)
    factor = vecs * vals.clamp(min=0).sqrt()  # cov = factor @ factor.T
    z = torch.randn(k, x.shape[1], generator=generator, dtype=torch.float64)
    return (mu.double() + z @ factor.T).float()


def install_rows(model: Any, e_new: Any, w_new: Any, b_new: Any, tied: bool, has_head: bool) -> None:
    """Resize the model's matrices to the new row count and write the new rows (keeping ties)."""
    import torch  # noqa: PLC0415 - heavy, only when a model is remapped

    n_new = e_new.shape[0]
    try:
        model.resize_token_embeddings(n_new, mean_resizing=False)
    except TypeError:  # older transformers without mean_resizing
        model.resize_token_embeddings(n_new)
    emb = model.get_input_embeddings()
    with torch.no_grad():
        emb.weight.data = e_new.to(emb.weight.dtype).contiguous()
        if hasattr(emb, "num_embeddings"):
            emb.num_embeddings = n_new
        head = model.get_output_embeddings()
        if has_head and head is not None:
            if tied:
                head.weight = emb.weight
            else:
                head.weight.data = w_new.to(head.weight.dtype).contiguous()
            if b_new is not None and getattr(head, "bias", None) is not None:
                head.bias.data = b_new.to(head.bias.dtype).contiguous()
            if hasattr(head, "out_features"):
                head.out_features = n_new
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()
    cfg = model.config
    cfg.vocab_size = n_new
    text_cfg = getattr(cfg, "text_config", None)
    if text_cfg is not None and hasattr(text_cfg, "vocab_size"):
        text_cfg.vocab_size = n_new


_CONFIG_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def _remap_config_ids(model, id_map: Mapping[int, int]) -> dict[str, Any]:
    """Move bos/eos/pad ids in the config and generation config to their new ids."""
    dropped: dict[str, Any] = {}
    targets = [model.config]
    gen = getattr(model, "generation_config", None)
    if gen is not None:
        targets.append(gen)
    for obj in targets:
        for key in _CONFIG_ID_KEYS:
            v = getattr(obj, key, None)
            if v is None:
                continue
            if isinstance(v, list):
                new = [id_map[i] for i in v if i in id_map]
                if len(new) != len(v):
                    dropped[key] = [i for i in v if i not in id_map]
                setattr(obj, key, new or None)
            elif isinstance(v, int):
                if v in id_map:
                    setattr(obj, key, id_map[v])
                else:
                    dropped[key] = v
                    setattr(obj, key, None)
    return dropped


def remap_model(
    source: str | os.PathLike,
    old_tok: LoadedTokenizer,
    new_tok: LoadedTokenizer,
    id_map: Mapping[int, int] | None,
    out_dir: str | os.PathLike,
    *,
    init: str = "fvt",
    report: dict | None = None,
    report_name: str = "prune_report.json",
    seed: int = 0,
) -> RemapReport:
    """Load a model, remap its embeddings to the new tokenizer and save it (with the tokenizer and the report,
    its ``embeddings`` entry added, as `report_name`) to out_dir."""
    model = load_model(source)
    rep = remap_embeddings(model, old_tok, new_tok, id_map, init=init, seed=seed)
    full = dict(report or {})
    full["embeddings"] = rep.to_json()
    save_model(model, out_dir, new_tok, full, report_name=report_name)
    return rep
