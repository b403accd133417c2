"""Indicators of under-trained tokens from the embedding matrices, and the candidates they select.

After Land & Bartolo, "Fishing for Magikarp" (EMNLP 2024): the L2 norm of the input embeddings of untied
models; the cosine and L2 distance of the unembedding rows to the mean reference row, optionally with the first
principal component removed; lower = more under-trained for every indicator. Candidates are the tokens that
round-trip and sit at or below a low percentile of the main indicator.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError
from ..weights import EmbeddingWeights, Matrix
from .roundtrip import OK, OK_SPECIAL

#: Indicator names → human labels (lower = more under-trained for every one of them).
INDICATOR_LABELS = {
    "input_norm": "L2 norm of input embedding",
    "cosine": "cosine distance to reference mean",
    "cosine_nopc1": "cosine distance to reference mean (1st PC removed)",
    "l2_distance": "L2 distance to reference mean",
    "bias": "output bias",
}


def row_norms(m: Matrix) -> np.ndarray:
    """L2 norm of every row (float32), computed block by block."""
    out = np.empty(m.shape[0], dtype=np.float32)
    for s, b in m.blocks():
        out[s : s + len(b)] = np.sqrt(np.einsum("ij,ij->i", b, b))
    return out


def duplicate_row_groups(m: Matrix, *, min_size: int = 2, seed: int = 0) -> list[list[int]]:
    """Groups of rows that are exactly identical (and non-zero): a random projection finds equal rows,
    which are then confirmed by comparing the rows themselves."""
    rng = np.random.default_rng(seed)
    r = rng.standard_normal(m.shape[1])
    proj = np.empty(m.shape[0], dtype=np.float64)
    for s, b in m.blocks():
        proj[s : s + len(b)] = b.astype(np.float64) @ r
    order = np.argsort(proj, kind="stable")
    sp = proj[order]
    cuts = np.flatnonzero(np.diff(sp) != 0) + 1
    groups: list[list[int]] = []
    for g in np.split(order, cuts):
        if len(g) < min_size:
            continue
        rows = m.take(g)
        if not np.any(rows[0]):
            continue  # all-zero rows carry no direction
        same = [int(i) for i, row in zip(g, rows) if np.array_equal(row, rows[0])]
        if len(same) >= min_size:
            groups.append(sorted(same))
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def first_principal_component(
    m: Matrix,
    *,
    max_iters: int = 30,
    k: int = 8,
    tol: float = 1e-7,
    seed: int = 0,
    sample_rows: int | None = 16384,
) -> tuple[np.ndarray, np.ndarray]:
    """(mean row, first principal direction) by block subspace iteration with Rayleigh–Ritz over row blocks
    (no SVD of the matrix; stops when the direction is stable). The mean uses every row; the direction is
    estimated on a random sample of `sample_rows` rows when the matrix is larger (None = all rows)."""
    n, d = m.shape
    mu = np.zeros(d, dtype=np.float64)
    for _, b in m.blocks():
        mu += b.sum(axis=0, dtype=np.float64)
    mu /= n
    mu32 = mu.astype(np.float32)
    if sample_rows and n > sample_rows:
        idx = np.sort(np.random.default_rng(seed).choice(n, sample_rows, replace=False))
        m = Matrix(m.take(idx), "F32", m.name)
    k = max(1, min(k, d))
    rng = np.random.default_rng(seed)
    v = np.linalg.qr(rng.standard_normal((d, k)))[0].astype(np.float32)
    pc = np.zeros(d)
    for _ in range(max_iters):
        y = np.zeros((d, k), dtype=np.float64)
        for _, b in m.blocks():
            b -= mu32
            y += b.T @ (b @ v)
        small = v.astype(np.float64).T @ y  # Rayleigh–Ritz on the current subspace
        w, q = np.linalg.eigh((small + small.T) / 2)
        new = v.astype(np.float64) @ q[:, -1]
        new /= np.linalg.norm(new)
        done = abs(float(new @ pc)) > 1 - tol
        pc = new
        if done:
            break
        v = np.linalg.qr(y)[0].astype(np.float32)
    return mu32, pc.astype(np.float32)


def _distances(
    m: Matrix, ref_ids: list[int], *, mu: np.ndarray | None = None, pc: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine distance and L2 distance of every row to the mean reference row (optionally in PC1-removed space)."""
    refs = m.take(ref_ids)
    if pc is not None:
        refs = refs - mu
        refs -= np.outer(refs @ pc, pc)
    u = refs.astype(np.float64).mean(axis=0).astype(np.float32)
    un = float(np.linalg.norm(u))
    uu = np.float32(un * un)
    n = m.shape[0]
    cos = np.empty(n, dtype=np.float32)
    l2 = np.empty(n, dtype=np.float32)
    for s, b in m.blocks():
        if pc is not None:
            b -= mu
            b -= np.outer(b @ pc, pc)
        e = s + len(b)
        n2 = np.einsum("ij,ij->i", b, b)
        dots = b @ u
        cos[s:e] = 1.0 - dots / np.maximum(np.sqrt(n2) * un, 1e-6)
        # ‖x−u‖² = ‖x‖² − 2x·u + ‖u‖² (one pass less); rows close to u are recomputed exactly (cancellation)
        d2 = n2 - 2.0 * dots + uu
        close = d2 < 1e-2 * (n2 + uu)
        if close.any():
            diff = b[close] - u
            d2[close] = np.einsum("ij,ij->i", diff, diff)
        l2[s:e] = np.sqrt(np.maximum(d2, 0.0))
    return cos, l2


def compute_indicators(
    w: EmbeddingWeights, reference_ids: list[int] | None, *, remove_pc1: bool = False
) -> dict[str, np.ndarray]:
    """Indicators over all rows, in magikarp's order: [input_norm if untied] + cosine(, cosine_nopc1), l2_distance
    (+ input_norm for models without an LM head) (+ bias). Lower = more under-trained."""
    out: dict[str, np.ndarray] = {}
    untied = w.input is not None and w.output is not None
    if untied:
        out["input_norm"] = row_norms(w.input)
    if reference_ids:
        m = w.unembedding
        bad = [i for i in reference_ids if not 0 <= i < m.shape[0]]
        if bad:
            raise DataError(f"reference ids outside the {m.shape[0]} embedding rows: {bad[:5]}")
        cos, l2 = _distances(m, list(reference_ids))
        out["cosine"] = cos
        if remove_pc1:
            mu, pc = first_principal_component(m)  # direction from a 16k-row sample on big matrices
            out["cosine_nopc1"], _ = _distances(m, list(reference_ids), mu=mu, pc=pc)
        out["l2_distance"] = l2
    elif not untied:
        raise DataError(
            "this model's embeddings are tied (or there is no separate input matrix): "
            "the indicators need reference tokens, and none were found or given"
        )
    if w.input is not None and not untied and not w.has_lm_head:
        # no LM head (encoders): the input rows only get input gradients, so their norm is informative too
        out["input_norm"] = row_norms(w.input)
    if w.bias is not None and len(w.bias) == w.n_rows:
        out["bias"] = w.bias.astype(np.float32)
    return out


def default_main_indicator(names: list[str], remove_pc1: bool = False) -> str:
    """magikarp's default: the first indicator (input norm for untied models, else cosine)."""
    if remove_pc1 and "cosine_nopc1" in names and "input_norm" not in names:
        return "cosine_nopc1"
    return names[0]


# --------------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------------
def select_candidates(
    indicator: np.ndarray, categories: list[str], *, percentile: float = 2.0, n_tokens: int | None = None
) -> tuple[float, list[int]]:
    """Threshold = `percentile`-th percentile over OK tokens; candidates = OK/OK_SPECIAL ids at or below it."""
    n = n_tokens if n_tokens is not None else len(categories)
    cats = np.asarray(categories[:n])
    ind = np.asarray(indicator[:n], dtype=np.float64)
    finite = np.isfinite(ind)  # NaN/inf rows (corrupt weights) are never candidates
    ok = (cats == OK) & finite
    if not ok.any():
        return float("nan"), []
    thr = float(np.percentile(ind[ok], percentile))
    sel = np.flatnonzero(((cats == OK) | (cats == OK_SPECIAL)) & finite & (ind <= thr))
    return thr, [int(i) for i in sel[np.argsort(ind[sel], kind="stable")]]
