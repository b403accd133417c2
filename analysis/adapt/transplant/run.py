"""Run a transplant: load model A (never remote code), give it tokenizer B's rows (:mod:`.plan`: copied where B
and A share a token, initialised by the chosen method elsewhere — :func:`analysis.adapt.embeddings.init_rows`,
the same FVT, mean, MVN, random and OMP as an extension's), set ``config.json`` / ``generation_config.json`` to
B's special ids, and write a Hugging Face folder with B's tokenizer files and chat template (and a GGUF for
llama.cpp). Also the model check's reader of such a folder (:func:`read_for_model_check`): the edited ids
correspond to the original's through the transplant's own map, not by token string.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from analysis.adapt.embeddings import INITS, init_rows, install_rows, pieces_outside, save_model
from analysis.adapt.omp import DEFAULT_ANCHORS, SPACES, anchor_ids, code_rows
from analysis.adapt.vocab_map import EditedVocab, byte_lengths
from analysis.core.outputs import atomic_folder, atomic_write_text, check_output_folder, strict_json
from analysis.core.progress import Progress, report, scaled
from analysis.errors import DataError, ModelLoadError, TokenizerLoadError
from analysis.model.bpb import prefix_token
from analysis.model.gguf_model import DTYPES, HF_ARCHITECTURES, GgufWriteInfo, export_gguf
from analysis.model.models import load_causal_lm
from analysis.model.source import resolve_model, tokenizer_for_model
from analysis.model.weights import load_embeddings
from analysis.tokenizer.gguf_export import gguf_model_kind
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .plan import COPIED_BYTES, TransplantPlan, plan_transplant, reading, special_roles
from .report import KIND, REPORT_NAME, TransplantResult

#: OMP atoms per token (mergekit's tokensurgeon default; Goddard & Fernandes Neto sweep k).
DEFAULT_K = 64
#: OMP screening: each token's atoms are chosen among this many of the anchors most correlated with it.
DEFAULT_CANDIDATES = 128


def _peak_rss() -> int:
    """The process's peak resident memory in bytes (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _matrices(model: Any) -> tuple[Any, Any, Any, bool, bool]:
    """(input rows, untied output rows or None, output bias or None, tied, has a head), detached copies."""
    emb = model.get_input_embeddings()
    if emb is None or not hasattr(emb, "weight"):
        raise ModelLoadError("the model has no input embedding matrix")
    head = model.get_output_embeddings()
    has_head = head is not None and hasattr(head, "weight")
    tied = bool(has_head and head.weight.data_ptr() == emb.weight.data_ptr())
    e = emb.weight.detach().float().clone()
    w = head.weight.detach().float().clone() if has_head and not tied else None
    bias = getattr(head, "bias", None) if has_head else None
    b = bias.detach().float().clone() if bias is not None else None
    return e, w, b, tied, bool(has_head)


def config_ids(
    plan: TransplantPlan, b_tok: LoadedTokenizer, a_roles: dict[str, int]
) -> dict[str, int | None]:
    """bos/eos/pad/unk ids for the transplanted model's config: B's own (its tokenizer config, the BOS its
    post-processor adds); a role B does not name keeps A's token where B carries A's row for it (A's BOS as the
    prefix every line is read after), else None."""
    rb = special_roles(b_tok)
    o2e = plan.o2e(max(plan.src.max(initial=0), max(a_roles.values(), default=0)) + 1)
    out: dict[str, int | None] = {}
    for role in ("bos", "eos", "pad", "unk"):
        if role in rb:
            out[role] = int(rb[role])
        elif role in a_roles and 0 <= a_roles[role] < len(o2e) and o2e[a_roles[role]] >= 0:
            out[role] = int(o2e[a_roles[role]])
        else:
            out[role] = None
    return out


def _set_config(model: Any, ids: dict[str, int | None]) -> None:
    """Write the special ids into the model's config and generation config."""
    for cfg in (model.config, getattr(model, "generation_config", None)):
        if cfg is None:
            continue
        for role, v in ids.items():
            setattr(cfg, f"{role}_token_id", v)


def check_arguments(init: str, k: int, gguf: bool, gguf_type: str, tokenizer: LoadedTokenizer) -> None:
    """DataError for arguments that cannot work (before anything is loaded)."""
    if init not in INITS:
        raise DataError(f"unknown init {init!r}; choose one of {', '.join(INITS)}")
    if k < 1:
        raise DataError("--k must be at least 1")
    if gguf_type not in DTYPES:
        raise DataError(f"unknown GGUF tensor type {gguf_type!r}; choose one of {', '.join(DTYPES)}")
    if gguf:
        gguf_model_kind(tokenizer)  # a tokenizer llama.cpp cannot read is refused now, not after the work


def donor_pairs(
    plan: TransplantPlan, donor_rows: int, exclude: set[int], anchors: int
) -> tuple[list[int], list[int]]:
    """The OMP dictionary of a donor transplant: (B ids, A ids) of the first `anchors` tokens shared by bytes (in
    A's id order, one B id per A id), those B ids inside the donor's `donor_rows`, A's specials `exclude`d."""
    seen: dict[int, int] = {}
    for j in np.flatnonzero(plan.how == COPIED_BYTES).tolist():
        a = int(plan.src[j])
        if j < donor_rows and a not in exclude and a not in seen:
            seen[a] = j
    a_ids = sorted(seen)[:anchors]
    return [seen[a] for a in a_ids], a_ids


def donor_init(
    donor: str | os.PathLike,
    plan: TransplantPlan,
    missing: list[int],
    e_old: Any,
    w_old: Any,
    *,
    exclude: set[int],
    k: int,
    anchors: int,
    candidates: int | None,
    progress: Progress | None = None,
) -> tuple[Any, Any, list[int], dict[str, Any]]:
    """Goddard & Fernandes Neto's OMP with a donor model (one that uses B's tokenizer): each new token's donor
    input row is coded over the shared tokens' donor input rows and the codes are applied to A's input rows of
    those tokens; the LM head likewise in the donor's output space (its input space when it is tied). Returns
    (input rows, output rows or None, the `missing` ids the donor has no row for — left to the caller — and a
    summary). Only the donor's embedding matrices are read."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    emb = load_embeddings(donor)
    if emb.input is None:
        raise DataError(f"the donor {donor} has no input embedding matrix")
    d_rows = int(emb.input.shape[0])
    b_ids, a_ids = donor_pairs(plan, d_rows, exclude, anchors)
    if len(b_ids) < 1:
        raise DataError("the donor shares no row with the model: is it a model of the new tokenizer?")
    coded = [j for j in missing if j < d_rows]
    beyond = [j for j in missing if j >= d_rows]
    d_in = torch.from_numpy(emb.input.take(b_ids + coded)).float()
    n = len(b_ids)
    a_sel = torch.as_tensor(a_ids)
    bases = [e_old[a_sel].float()] + ([w_old[a_sel].float()] if w_old is not None else [])
    d_out = emb.output
    if w_old is None or d_out is None:  # one code for every matrix of A
        rows = code_rows(d_in[:n], d_in[n:], bases, k=k, candidates=candidates, progress=progress)
        rows_e, rows_w = rows[0], (rows[1] if w_old is not None else None)
    else:  # the input and output sides each in the donor's own space
        rows_e = code_rows(d_in[:n], d_in[n:], bases[:1], k=k, candidates=candidates,
                           progress=scaled(progress, 0, 0.5))[0]  # fmt: skip
        d_o = torch.from_numpy(d_out.take(b_ids + coded)).float()
        rows_w = code_rows(d_o[:n], d_o[n:], bases[1:], k=k, candidates=candidates,
                           progress=scaled(progress, 0.5, 1))[0]  # fmt: skip
    info = {"donor": str(donor), "donor_rows": d_rows, "donor_width": int(emb.input.shape[1]),
            "donor_tied": d_out is None, "dictionary": n, "beyond_donor_rows": len(beyond)}  # fmt: skip
    full_e = torch.empty((len(missing), e_old.shape[1]))
    full_w = torch.empty((len(missing), w_old.shape[1])) if w_old is not None else None
    pos = {j: r for r, j in enumerate(missing)}
    at = torch.as_tensor([pos[j] for j in coded], dtype=torch.long)
    full_e[at] = rows_e
    if full_w is not None and rows_w is not None:
        full_w[at] = rows_w
    return full_e, full_w, beyond, info


def transplant(
    model: str | os.PathLike,
    tokenizer: LoadedTokenizer,
    out: str | os.PathLike,
    *,
    init: str = "omp",
    k: int = DEFAULT_K,
    seed: int = 0,
    omp_layer: int | None = None,
    omp_anchors: int = DEFAULT_ANCHORS,
    omp_candidates: int | None = DEFAULT_CANDIDATES,
    omp_space: str = "embed",
    donor: str | os.PathLike | None = None,
    gguf: bool = False,
    gguf_type: str = "f32",
    replace: bool = False,
    progress: Progress | None = None,
) -> TransplantResult:
    """Give `model` (a folder, weight file, GGUF file or hub id; A) the tokenizer `tokenizer` (B) and write the
    result to `out` (atomic; a non-empty folder is refused unless `replace`). `init` fills the rows of B's tokens
    A lacks (:data:`analysis.adapt.embeddings.INITS`). OMP codes each token over `k` of the first `omp_anchors`
    shared tokens, screened to `omp_candidates` (None: exact OMP): with a `donor` (a model of B's tokenizer), in
    the donor's embedding spaces (:func:`donor_init`, the paper's method; tokens beyond the donor's rows get
    FVT rows); without one, in A's own space `omp_space` (:data:`analysis.adapt.omp.SPACES`; "hidden" at layer
    `omp_layer`, default the middle one). With `gguf`, also ``<out-name>.gguf`` (Llama architecture)."""
    import torch  # noqa: PLC0415 - heavy, only when a model is transplanted

    check_arguments(init, k, gguf, gguf_type, tokenizer)
    if omp_space not in SPACES:
        raise DataError(f"unknown OMP space {omp_space!r}; choose one of {', '.join(SPACES)}")
    if donor is not None and init != "omp":
        raise DataError("--donor is for --init omp (the donor's rows are OMP's shared space)")
    if donor is not None:
        resolve_model(donor)  # a donor that cannot be read is refused now, not after the work
    check_output_folder(out, replace=replace)
    t0 = time.perf_counter()
    report(progress, 0, 1, "loading the model")
    src = resolve_model(model)
    a_tok = tokenizer_for_model(src)
    lm = load_causal_lm(src, dtype=torch.float32)
    m = lm.model
    if gguf and not any(a in HF_ARCHITECTURES for a in (m.config.architectures or [])):
        raise DataError(f"--gguf converts {', '.join(HF_ARCHITECTURES)} models; {src.label} is "
                        f"{', '.join(m.config.architectures or ['?'])}")  # fmt: skip
    e_old, w_old, b_old, tied, has_head = _matrices(m)
    a_rows = int(e_old.shape[0])
    a_config = m.config.to_dict()
    report(progress, 0.05, 1, "matching the vocabularies")
    plan = plan_transplant(
        a_tok, tokenizer, a_rows=a_rows, a_config=a_config, need_pieces=init in ("fvt", "omp")
    )
    missing = plan.initialised
    idx = torch.as_tensor(np.where(plan.src >= 0, plan.src, 0))
    e_new = e_old[idx].clone()
    w_new = w_old[idx].clone() if w_old is not None else None
    b_new = b_old[idx].clone() if b_old is not None else None
    t1 = time.perf_counter()
    donor_info = None
    if missing:
        std = float(getattr(m.config, "initializer_range", None) or 0.02)
        todo, base = missing, "fvt" if donor is not None else init
        if donor is not None:
            rows_e, rows_w, todo, donor_info = donor_init(
                donor, plan, missing, e_old, w_old, exclude=set(a_tok.added_ids), k=k, anchors=omp_anchors,
                candidates=omp_candidates, progress=scaled(progress, 0.1, 0.85),
            )  # fmt: skip
            rows_b = b_old[:a_rows].float().mean().expand(len(missing)).clone() if b_old is not None else None
        if todo:
            got_e, got_w, got_b, _ = init_rows(
                e_old, w_old, b_old, a_tok, tokenizer, todo, base, seed=seed, std=std, omp_k=k, model=m,
                pieces=plan.pieces, omp_anchors=plan.shared_a_ids, omp_anchor_count=omp_anchors, omp_layer=omp_layer,
                omp_candidates=omp_candidates, omp_space=omp_space, progress=scaled(progress, 0.1, 0.85),
            )  # fmt: skip
            if donor is None:
                rows_e, rows_w, rows_b = got_e, got_w, got_b
            else:  # the tokens beyond the donor's rows: FVT
                pos = {j: r for r, j in enumerate(missing)}
                at = torch.as_tensor([pos[j] for j in todo], dtype=torch.long)
                rows_e[at] = got_e.float()
                if rows_w is not None and got_w is not None:
                    rows_w[at] = got_w.float()
                if rows_b is not None and got_b is not None:
                    rows_b[at] = got_b.float()
        rows = torch.as_tensor(missing)
        e_new[rows] = rows_e.float()
        if w_new is not None and rows_w is not None:
            w_new[rows] = rows_w.float()
        if b_new is not None and rows_b is not None:
            b_new[rows] = rows_b.float()
    seconds_init = time.perf_counter() - t1
    install_rows(m, e_new, w_new, b_new, tied, has_head)
    ids = config_ids(plan, tokenizer, special_roles(a_tok, a_config))
    _set_config(m, ids)
    warnings = []
    template = tokenizer.config.get("chat_template")
    if not template:
        warnings.append(
            f"{tokenizer.name} has no chat template: the folder has none (A's would name A's markers)"
        )
    n_layers = int(getattr(m.config, "num_hidden_layers", 0) or 0)
    omp_info = None
    if init == "omp":
        omp_info = {"k": k, "anchors": min(omp_anchors, len(plan.shared_a_ids)), "candidates": omp_candidates,
                    "space": "donor" if donor is not None else omp_space}  # fmt: skip
        if donor is None and omp_space == "hidden":
            omp_info["layer"] = n_layers // 2 if omp_layer is None else omp_layer
        if donor is None and omp_space == "embed":  # the anchors and every piece of the coded tokens
            n_tok, specials = min(max(a_tok.id_to_token) + 1, a_rows), set(a_tok.added_ids)
            first = anchor_ids(n_tok, plan.shared_a_ids, specials, omp_anchors)
            plist = [plan.pieces.get(j, []) for j in missing]
            omp_info["dictionary"] = len(first) + len(pieces_outside(plist, first, n_tok, specials))
        if donor_info is not None:
            omp_info.update(donor_info)
            if donor_info["beyond_donor_rows"]:
                warnings.append(f"{donor_info['beyond_donor_rows']:,} of B's ids are beyond the donor's "
                                f"{donor_info['donor_rows']:,} rows: their rows are FVT's")  # fmt: skip
    res = TransplantResult(
        model=src.label, tokenizer=tokenizer.name, plan=plan, init=init, k=k if init == "omp" else None, tied=tied,
        a_rows=a_rows, config_ids=ids, chat_template=bool(template), seconds=0.0, seconds_init=seconds_init,
        peak_rss_bytes=0, warnings=warnings, omp=omp_info,
    )  # fmt: skip
    report(progress, 0.9, 1, "writing the folder")
    with atomic_folder(out, replace=replace) as tmp:
        res.out = str(Path(out).resolve())
        res.seconds = time.perf_counter() - t0
        res.peak_rss_bytes = _peak_rss()
        save_model(m, tmp, tokenizer, res.to_json(with_map=True), report_name=REPORT_NAME)
    del m, lm
    if gguf:
        report(progress, 0.95, 1, "writing the GGUF")
        info = export_gguf(out, tokenizer, base=tokenizer, name=Path(out).resolve().name, dtype=gguf_type)
        res.gguf = info.to_json() if isinstance(info, GgufWriteInfo) else info
    res.seconds = time.perf_counter() - t0
    res.peak_rss_bytes = _peak_rss()
    atomic_write_text(Path(out) / REPORT_NAME, strict_json(res.to_json(with_map=True)))
    report(progress, 1, 1, "done")
    return res


# --------------------------------------------------------------------------------------------------
# The model check's reading of a transplant folder
# --------------------------------------------------------------------------------------------------
def _report(folder: str | os.PathLike) -> dict | None:
    f = Path(folder) / REPORT_NAME
    try:
        doc = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == KIND else None


def is_transplant_folder(folder: str | os.PathLike) -> bool:
    """Whether `folder` is a transplant's output (its report names the kind)."""
    return Path(folder).is_dir() and _report(folder) is not None


def read_for_model_check(folder: Path, original: LoadedTokenizer) -> tuple[LoadedTokenizer, EditedVocab]:
    """The transplanted folder's tokenizer and its :class:`EditedVocab` against `original` (A's tokenizer): ids
    correspond through the stored map (same bytes, same special token, same role); the prefix the edited model
    reads every line after corresponds to the row it carries."""
    doc = _report(folder)
    if doc is None or not isinstance(doc.get("source_ids"), list):
        raise DataError(f"{Path(folder).name}: no transplant map ({REPORT_NAME} with source_ids)")
    try:
        tok = load(folder)
    except TokenizerLoadError as e:
        raise DataError(f"{Path(folder).name}: no tokenizer in the transplant folder ({e})") from e
    src = np.asarray(doc["source_ids"], dtype=np.int64)
    a_top = max(original.id_to_token) + 1
    if len(src) != max(tok.id_to_token) + 1 or (src >= a_top).any():
        raise DataError(f"{Path(folder).name}: the transplant map does not fit these tokenizers (was the folder "
                        "made from this model?)")  # fmt: skip
    how = np.asarray(doc.get("source_how") or [COPIED_BYTES] * len(src), dtype=np.int8)
    plan = TransplantPlan(original.name, tok.name, src, how, [], {}, [])
    prefer = {}
    try:
        cfg = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
        p = prefix_token(tok, SimpleNamespace(**cfg)).id
        if 0 <= p < len(src) and src[p] >= 0:
            prefer[int(src[p])] = p
    except (OSError, ValueError, DataError):
        pass
    o2e = plan.o2e(a_top, prefer)
    new = np.flatnonzero(src < 0).tolist()
    removed = sorted(set(original.id_to_token) - {int(a) for a in src[src >= 0]})

    def encode(lines: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)]

    def init_pieces() -> dict[int, list[int]]:
        return reading(original, tok, new)

    anchors = sorted({int(a) for a in src[(how == COPIED_BYTES) & (src >= 0)]})
    vocab = EditedVocab(tok.name, tok, encode, o2e, new, removed, byte_lengths(tok),
                        {i: tok.id_to_token.get(i, f"<id {i}>") for i in new}, init_pieces, anchors)  # fmt: skip
    return tok, vocab
