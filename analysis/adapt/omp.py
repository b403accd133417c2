"""Orthogonal matching pursuit (OMP) init of new rows: each new token as a sparse combination of `k` shared
tokens (Goddard & Fernandes Neto, "Training-Free Tokenizer Transplantation via Orthogonal Matching Pursuit", 2025).

The paper's method needs a DONOR model that uses the new tokenizer: OMP codes a new token's donor embedding over
the shared tokens' donor embeddings (the dictionary), and the same coefficients applied to the base model's rows
of those shared tokens give the new row — input embeddings and LM head each in their own space
(:func:`code_rows`; the transplant's ``--donor``). Without a donor the shared space must come from the base model
itself; two are offered (``space``):

- ``"embed"`` (the default): the token's donor vector is its FVT vector — the mean of the base model's own rows of
  its pieces under the original tokenizer — coded over the shared tokens' rows in the same matrix (input rows
  for the input side, output rows for an untied head), the rows of its pieces joined to the dictionary (the
  code is applied to the same rows, so the FVT row is the best it can give, and it needs those rows as atoms:
  :func:`analysis.adapt.embeddings.pieces_outside`). Measured on SmolLM2-135M ← Qwen3 it is the better of the
  two (docs/transplant.md).
- ``"hidden"``: a middle layer's hidden state (:func:`hidden_space_rows`) — of an anchor read alone after the
  prefix token, and of the new token read as its pieces (at the last piece); the coefficients found there are
  applied to the anchors' rows. Contextual states mix in the prediction of the next token; the codes give rows
  whose logits take much of the probability mass from the shared tokens.

Anchors are shared tokens in the original's id order (BPE ids follow merge order: the most frequent first),
special tokens excluded. :func:`omp` is batched and deterministic (greedy atom choice by the largest absolute
correlation with the residual, then a least-squares refit on the chosen atoms): with screening, each target's
atoms come from its most correlated candidates, and the whole fit runs in Gram form over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analysis.core.progress import Progress, report, scaled
from analysis.errors import DataError

#: Atoms per new token (mergekit's tokensurgeon default; the paper sweeps k).
DEFAULT_K = 64
#: Shared spaces of the no-donor OMP (see the module docstring).
SPACES = ("embed", "hidden")
#: Screened OMP gathers each target's candidate Gram block from the dictionary's full Gram matrix when the
#: dictionary has at most this many rows (float32: 16,384² × 4 B = 1 GiB); larger ones compute it per target.
GRAM_MAX = 12288
#: Anchor tokens: the first ids of the original vocabulary.
DEFAULT_ANCHORS = 8192


def omp(
    dictionary: Any,
    targets: Any,
    k: int = DEFAULT_K,
    *,
    exclude: Any = None,
    candidates: int | None = None,
    keep: Any = None,
    progress: Progress | None = None,
) -> tuple[Any, Any]:
    """Sparse codes of `targets` (m × d) over the rows of `dictionary` (n × d): returns (indices m × k, long;
    coefficients m × k, float32) with ``targets[i] ≈ coefficients[i] @ dictionary[indices[i]]``.

    Each step picks the atom whose normalised row has the largest |correlation| with the residual (an atom is
    never picked twice), then refits all chosen coefficients by least squares (kept as an incremental QR of the
    chosen atoms: Gram–Schmidt, orthogonalised twice, so a step costs O(d·step), not a new solve). `exclude` (a
    bool tensor of n) marks rows that may never be chosen. Zero rows are never chosen. With `candidates` < n,
    each target's atoms are chosen among the `candidates` rows most correlated with the target itself (a
    screening that makes k = 64 over tens of thousands of atoms affordable on a CPU; None: every row, exact
    OMP); `keep` (m × j long, −1 = none) names rows that are always among a target's candidates (the rows a
    target is made of, when known). Torch tensors in, torch tensors out.
    """
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    d_mat = dictionary.detach().double()
    y = targets.detach().double()
    n, dim = d_mat.shape
    if y.ndim != 2 or y.shape[1] != dim:
        raise DataError(f"OMP targets must be m × {dim}, not {tuple(y.shape)}")
    if not 1 <= k <= n:
        raise DataError(f"OMP needs 1 ≤ k ≤ {n} atoms, not {k}")
    norms = d_mat.norm(dim=1)
    unit = d_mat / norms.clamp(min=1e-12)[:, None]
    banned = norms <= 1e-12
    if exclude is not None:
        banned = banned | torch.as_tensor(exclude, dtype=torch.bool)
    allowed = int((~banned).sum())
    if allowed < k:
        raise DataError(f"OMP needs {k} usable atoms; only {allowed} rows are non-zero and allowed")
    screen = candidates is not None and max(candidates, k) < allowed
    m = y.shape[0]
    idx = torch.zeros((m, k), dtype=torch.long)
    coef = torch.zeros((m, k), dtype=torch.float64)
    if screen:
        width = max(int(candidates), k)
        d32 = d_mat.float()
        full = d32 @ d32.T if n <= GRAM_MAX else None  # every candidate block is a gather from it
        chunk = max(1, (1 << 25) // (width * (max(k, n // width) if full is not None else max(width, dim))))
        for s in range(0, m, chunk):
            yb = y[s : s + chunk].float()
            raw = yb @ d32.T  # m × n inner products with the atoms
            corr0 = raw.abs() / norms.float().clamp(min=1e-12)
            if keep is not None:  # always candidates (unless banned): ranked above every correlation
                kb = torch.as_tensor(keep, dtype=torch.long)[s : s + chunk]
                r, c = torch.nonzero(kb >= 0, as_tuple=True)
                corr0[r, kb[r, c]] = float("inf")
            corr0[:, banned] = -1.0
            cand = corr0.topk(width, dim=1).indices  # m × C
            if full is not None:  # only the picked atoms' columns are ever needed: gathered step by step
                flat = full.view(-1)

                def column(pick: Any, cand: Any = cand, flat: Any = flat) -> Any:
                    at = cand.gather(1, pick[:, None]) * n + cand
                    return flat.take(at).double()

                diag = full.diagonal().take(cand).double()
                alpha0 = raw.gather(1, cand).double()
            else:
                atoms = d32[cand]  # m × C × d
                gram = torch.bmm(atoms, atoms.transpose(1, 2)).double()
                alpha0 = torch.bmm(atoms, yb[:, :, None])[:, :, 0].double()
                rows = torch.arange(len(cand))
                diag = gram.diagonal(dim1=1, dim2=2).clone()

                def column(pick: Any, gram: Any = gram, rows: Any = rows) -> Any:
                    return gram[rows, pick]

            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # k small steps per block: one thread is faster than two contending
            try:
                local, coef[s : s + chunk] = _batch_omp(column, diag, alpha0, k)
            finally:
                torch.set_num_threads(threads)
            idx[s : s + chunk] = cand.gather(1, local)
            report(progress, min(s + chunk, m), m, "OMP")
        return idx, coef.float()
    chunk = max(1, (1 << 25) // n)  # targets per block: the correlations stay ≈ 256 MB
    for s in range(0, m, chunk):
        idx[s : s + chunk], coef[s : s + chunk] = _omp_block(d_mat, unit, banned, y[s : s + chunk], k)
        report(progress, min(s + chunk, m), m, "OMP")
    return idx, coef.float()


def code_rows(
    dictionary: Any,
    targets: Any,
    bases: list[Any],
    *,
    k: int = DEFAULT_K,
    candidates: int | None = None,
    keep: Any = None,
    progress: Progress | None = None,
) -> list[Any]:
    """The paper's step: OMP codes of `targets` (m × d_donor, the new tokens' donor vectors) over `dictionary`
    (n × d_donor, the shared tokens' donor vectors), applied to each matrix of `bases` (n × d_base each: the base
    model's rows of the same n shared tokens, in the same order). One float32 tensor (m × d_base) per base.
    `keep`: rows of the dictionary always among a target's screened candidates (:func:`omp`)."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    kk = min(k, int(dictionary.shape[0]))
    idx, coef = omp(dictionary, targets, kk, candidates=candidates, keep=keep, progress=progress)
    out = []
    for mat in bases:
        src = mat.detach().float().cpu()
        step = max(1, (1 << 24) // (kk * int(src.shape[1])))  # the gathered atoms of a block stay ≈ 64 MB
        rows = torch.empty((len(idx), src.shape[1]), dtype=torch.float32)
        for s in range(0, len(idx), step):
            rows[s : s + step] = torch.bmm(coef[s : s + step, None, :], src[idx[s : s + step]])[:, 0, :]
        out.append(rows)
    return out


def anchor_ids(n_rows: int, pool: Sequence[int] | None, exclude: set[int] | None, anchors: int) -> list[int]:
    """The dictionary's ids: the first `anchors` of `pool` (default every id below `n_rows`) that are rows of the
    matrix and not in `exclude`."""
    ids = range(n_rows) if pool is None else [int(i) for i in pool]
    return [i for i in ids if 0 <= i < n_rows and i not in (exclude or set())][:anchors]


def hidden_space_rows(
    model: Any,
    matrices: list[Any],
    pieces: list[list[int]],
    prefix_id: int,
    *,
    exclude: set[int] | None = None,
    k: int = DEFAULT_K,
    anchors: int = DEFAULT_ANCHORS,
    anchor_ids: Sequence[int] | None = None,
    layer: int | None = None,
    candidates: int | None = None,
    batch: int = 256,
    progress: Progress | None = None,
) -> list[Any]:
    """New rows for every matrix in `matrices` (input rows first; each indexed by the original ids): OMP codes of
    each new token's hidden state (its `pieces` read after `prefix_id`, at the last piece; layer `layer`, default
    the middle one) over the hidden states of the anchors (the first `anchors` of `anchor_ids`, default ids
    0 … `anchors` − 1, minus `exclude`; each read alone after the prefix), applied to the anchors' rows.
    `candidates` screens each token's atoms (:func:`omp`). One float32 tensor (m × width) per matrix. The model
    runs only up to `layer` (the layers above it do not change its hidden state)."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    layer = n_layers // 2 if layer is None else layer
    if n_layers and not 0 <= layer <= n_layers:
        raise DataError(f"the OMP layer must be between 0 and {n_layers}, not {layer}")
    n_rows = int(matrices[0].shape[0])
    pool = range(n_rows) if anchor_ids is None else [int(i) for i in anchor_ids]
    ids = [i for i in pool if 0 <= i < n_rows and i not in (exclude or set())][:anchors]
    if len(ids) < k:
        raise DataError(f"OMP needs at least {k} anchor tokens, the vocabulary offers {len(ids)}")
    device = next(model.parameters()).device
    seqs = [[prefix_id, *(p or [prefix_id])] for p in pieces]
    total = len(ids) + len(seqs)
    anchor_h = _states(
        model, [[prefix_id, i] for i in ids], layer, batch, device, scaled(progress, 0, len(ids) / total)
    )
    new_h = _states(model, seqs, layer, batch, device, scaled(progress, len(ids) / total, 1.0))
    idx, coef = omp(anchor_h, new_h, k, candidates=candidates)
    chosen = torch.as_tensor(ids)[idx]  # m × k original ids
    out = []
    step = max(1, (1 << 24) // (k * int(matrices[0].shape[1])))  # the gathered atoms of a block stay ≈ 128 MB
    for mat in matrices:
        src = mat.detach().cpu()
        rows = torch.empty((len(chosen), src.shape[1]), dtype=torch.float32)
        for s in range(0, len(chosen), step):
            atoms = src[chosen[s : s + step]].to(torch.float64)
            rows[s : s + step] = (coef[s : s + step].double()[:, None, :] @ atoms)[:, 0, :].float()
        out.append(rows)
    return out


class _Reached(Exception):
    """Raised by the hook on the layer whose output is wanted: the layers above it need not run."""

    def __init__(self, value: Any) -> None:
        super().__init__("layer reached")
        self.value = value


def _decoder_layers(model: Any) -> Any:
    """The model's list of decoder layers (``model.model.layers`` for Llama-style models), None when unknown."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    return layers if layers is not None and hasattr(layers, "__getitem__") else None


def _states(
    model: Any, seqs: list[list[int]], layer: int, batch: int, device: Any, progress: Progress | None = None
) -> Any:
    """Hidden states (float32, CPU) at layer `layer` of the last token of every sequence, batched; the forward
    stops at that layer when the model's decoder layers are reachable (0 < layer < their number)."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    layers = _decoder_layers(model)
    stop = layers is not None and 0 < layer < len(layers)
    out = []
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for s in range(0, len(order), batch):
        group = [seqs[i] for i in order[s : s + batch]]
        width = max(len(q) for q in group)
        x = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros_like(x)
        for r, q in enumerate(group):
            x[r, : len(q)] = torch.as_tensor(q)
            mask[r, : len(q)] = 1
        with torch.inference_mode():
            kw = {
                "input_ids": x.to(device),
                "attention_mask": mask.to(device),
                "output_hidden_states": not stop,
            }
            if stop:

                def reached(_mod: Any, _inp: Any, output: Any) -> None:
                    raise _Reached(output[0] if isinstance(output, tuple) else output)

                hook = layers[layer - 1].register_forward_hook(reached)
                try:
                    model(**kw)
                    raise DataError("the model's decoder layers were not reached")  # pragma: no cover
                except _Reached as got:
                    h = got.value
                finally:
                    hook.remove()
            else:
                try:
                    h = model(logits_to_keep=1, **kw).hidden_states[layer]
                except TypeError:
                    h = model(**kw).hidden_states[layer]
        last = mask.sum(1) - 1
        out.append(h[torch.arange(len(group)), last.to(h.device)].float().cpu())
        report(progress, min(s + batch, len(order)), len(order), "hidden states")
    states = torch.cat(out)
    back = torch.empty_like(states)
    back[torch.as_tensor(order)] = states
    return back


def _omp_block(d_mat: Any, unit: Any, banned: Any, y: Any, k: int) -> tuple[Any, Any]:
    """OMP for one block of targets (float64 tensors) over every allowed row of the dictionary."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    m, dim = y.shape
    rows = torch.arange(m)
    idx = torch.zeros((m, k), dtype=torch.long)
    q = torch.zeros((m, dim, k), dtype=torch.float64)  # orthonormal basis of the chosen atoms
    r = torch.zeros((m, k, k), dtype=torch.float64)  # chosen atoms = q @ r (upper triangular)
    qty = torch.zeros((m, k), dtype=torch.float64)
    residual = y.clone()
    used = banned[None, :].repeat(m, 1)
    for step in range(k):
        corr = (residual @ unit.T).abs()
        corr[used] = -1.0
        atom = corr.argmax(dim=1)
        used[rows, atom] = True
        idx[:, step] = atom
        a = d_mat[atom]  # m × d
        v = a
        proj = torch.zeros((m, step), dtype=torch.float64)
        if step:
            basis = q[:, :, :step]
            for _ in range(2):  # classical Gram–Schmidt, twice: orthogonal to working precision
                c = torch.bmm(basis.transpose(1, 2), v[:, :, None])[:, :, 0]
                v = v - torch.bmm(basis, c[:, :, None])[:, :, 0]
                proj = proj + c
        nrm = v.norm(dim=1)
        ok = nrm > 1e-10 * a.norm(dim=1).clamp(
            min=1e-300
        )  # an atom in the span of the chosen ones adds nothing
        qs = torch.where(ok[:, None], v / nrm.clamp(min=1e-300)[:, None], torch.zeros_like(v))
        q[:, :, step] = qs
        r[:, :step, step] = torch.where(ok[:, None], proj, torch.zeros_like(proj))
        r[:, step, step] = torch.where(ok, nrm, torch.ones_like(nrm))
        t = (qs * residual).sum(1)
        qty[:, step] = t
        residual = residual - qs * t[:, None]
    coef = torch.linalg.solve_triangular(r, qty[:, :, None], upper=True)[:, :, 0]
    return idx, coef


def _batch_omp(column: Any, diag: Any, alpha0: Any, k: int) -> tuple[Any, Any]:
    """OMP in Gram form (Rubinstein, Zibulevsky & Elad, "Efficient Implementation of the K-SVD Algorithm using
    Batch Orthogonal Matching Pursuit", 2008) for a block of targets, each over its own C atoms: `column(pick)`
    (pick: m local indices) gives the picked atoms' inner products with all C atoms (m × C), `diag` (m × C) the
    atoms' squared norms, `alpha0` (m × C) their inner products with the target. The same choice as
    :func:`_omp_block` (largest |correlation| of the normalised atom with the residual, never twice) and the same
    least-squares fit, through the chosen atoms' orthonormalised directions q_s: each step keeps Dᵀq_s (m × C), so
    the correlations update as α ← α − (Dᵀq_s)(q_sᵀy) and the Cholesky factor of the chosen atoms' Gram matrix
    grows by the row (Dᵀq_j)[new atom]; one back substitution at the end gives the coefficients. A step costs
    O(C·step), independent of the width d, and only k of the C×C Gram columns are read. Returns (local indices
    m × k, coefficients m × k, float64)."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    m, c_n = alpha0.shape
    rows = torch.arange(m)
    diag = diag.clamp(min=1e-300)
    scale = diag.sqrt()
    chol = torch.zeros((m, k, k), dtype=torch.float64)
    dq = torch.zeros((m, k, c_n), dtype=torch.float64)  # row j: Dᵀ q_j over the C atoms
    z = torch.zeros((m, k), dtype=torch.float64)  # q_jᵀ y
    idx = torch.zeros((m, k), dtype=torch.long)
    used = diag <= 1e-24
    alpha = alpha0.clone()
    for step in range(k):
        score = (alpha.abs() / scale).masked_fill_(used, -1.0)
        pick = score.argmax(dim=1)
        used[rows, pick] = True
        idx[:, step] = pick
        g = column(pick)  # m × C: the new atom's inner products (the Gram matrix is symmetric)
        d_new = diag[rows, pick]
        if step:
            w = dq[rows, :step, pick]  # q_jᵀ d_new
            u = g - torch.bmm(w[:, None, :], dq[:, :step, :])[:, 0, :]
            rest = d_new - (w * w).sum(1)
        else:
            w, u, rest = None, g, d_new
        ok = rest > 1e-10 * d_new  # an atom in the span of the chosen ones adds nothing (coefficient 0)
        norm = torch.where(ok, rest.clamp(min=1e-300).sqrt(), torch.ones_like(rest))
        u = torch.where(ok[:, None], u / norm[:, None], torch.zeros_like(u))
        if w is not None:
            chol[:, step, :step] = torch.where(ok[:, None], w, torch.zeros_like(w))
        chol[:, step, step] = norm
        zs = torch.where(ok, alpha[rows, pick] / norm, torch.zeros_like(norm))
        z[:, step] = zs
        dq[:, step, :] = u
        alpha = alpha - u * zs[:, None]
    coef = torch.linalg.solve_triangular(chol.transpose(1, 2), z[:, :, None], upper=True)[:, :, 0]
    return idx, coef
