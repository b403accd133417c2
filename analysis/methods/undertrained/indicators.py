"""Indicators of under-trained tokens from the embedding matrices, and the candidates they select.

After Land & Bartolo, "Fishing for Magikarp" (EMNLP 2024): the L2 norm of the input embeddings of untied
models; the cosine and L2 distance of the unembedding rows to the mean reference row, optionally with the first
principal component removed; lower = more under-trained for every indicator. Candidates are the tokens that
round-trip and sit at or below a low percentile of the main indicator.

The indicators read only the embedding matrices, block by block (never the whole model). With
``device="cuda"`` (or ``"auto"`` when CUDA is present) the blocks are copied in their stored dtype to the GPU and
the norms and distances are computed there; the results equal the CPU path up to float32 rounding.
"""

from __future__ import annotations

import numpy as np

from analysis.errors import DataError
from analysis.model.matrix import EmbeddingWeights, Matrix

from .roundtrip import OK, OK_SPECIAL

#: Indicator names → human labels (lower = more under-trained for every one of them).
INDICATOR_LABELS = {
    "input_norm": "L2 norm of input embedding",
    "cosine": "cosine distance to reference mean",
    "cosine_nopc1": "cosine distance to reference mean (1st PC removed)",
    "l2_distance": "L2 distance to reference mean",
    "bias": "output bias",
}


#: `auto` sends matrices at least this large to the GPU; smaller ones are faster on the CPU than the transfer
#: (measured on an H100: SmolLM2's 49k × 576 matrix 0.17 s on the CPU vs 0.40 s on CUDA; Llama-3.1-sized
#: 128k × 2048 bf16 1.88 s vs 1.23 s)
AUTO_GPU_MIN_BYTES = 256 * 1024 * 1024


def resolve_device(device: str | None, nbytes: int | None = None) -> str:
    """`cpu` or a CUDA device for the indicators: None/`cpu` → `cpu`; `auto` → `cuda` when available and the
    matrix (`nbytes` stored) is large enough for the GPU to win."""
    if device in (None, "", "cpu"):
        return "cpu"
    import torch  # noqa: PLC0415 - heavy, only for the GPU path

    if device == "auto":
        big = nbytes is None or nbytes >= AUTO_GPU_MIN_BYTES
        return "cuda" if big and torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DataError(f"device {device!r} asked for, but CUDA is not available on this machine")
    if not device.startswith("cuda"):
        raise DataError(f"unknown device {device!r} for the indicators (cpu, cuda, cuda:N or auto)")
    return device


def _gpu_blocks(m: Matrix, device: str, rows: int | None = None):
    """Yield (start, float32 torch block on `device`): the stored bytes travel, the conversion runs on the GPU."""
    import torch  # noqa: PLC0415 - heavy, only for the GPU path

    n, d = m.shape
    rows = rows or max(1, (1 << 26) // max(1, d))
    for s in range(0, n, rows):
        raw = np.ascontiguousarray(m.raw[s : min(n, s + rows)])
        if m.dtype == "BF16":
            t = torch.from_numpy(raw.view(np.int16)).to(device).view(torch.bfloat16).float()
        elif m.dtype in ("F16", "F32", "F64"):
            t = torch.from_numpy(raw).to(device).float()
        else:  # quantized or float8 storage: dequantize on the CPU
            t = torch.from_numpy(m.block(s, min(n, s + rows))).to(device)
        yield s, t


def usable_rows(b: np.ndarray) -> np.ndarray:
    """Rows of a float block whose squared norm is finite in float32: the rows the indicators can use (a NaN, an
    infinity or values near float32's limit in a row make its norm, and any sum it enters, non-finite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.isfinite(np.einsum("ij,ij->i", b, b))


def row_norms(m: Matrix, device: str = "cpu") -> np.ndarray:
    """L2 norm of every row (float32), computed block by block (on the GPU when `device` is a CUDA device)."""
    out = np.empty(m.shape[0], dtype=np.float32)
    if device != "cpu":
        for s, t in _gpu_blocks(m, device):
            out[s : s + t.shape[0]] = t.norm(dim=1).cpu().numpy()
        return out
    for s, b in m.blocks():
        out[s : s + len(b)] = np.sqrt(np.einsum("ij,ij->i", b, b))
    return out


def duplicate_row_groups(m: Matrix, *, min_size: int = 2, seed: int = 0) -> list[list[int]]:
    """Groups of rows that are exactly identical (and non-zero): a random projection finds equal rows,
    which are then confirmed by comparing the rows themselves."""
    rng = np.random.default_rng(seed)
    r = rng.standard_normal(m.shape[1])
    proj = np.empty(m.shape[0], dtype=np.float64)
    # a non-finite row projects to NaN/inf: a group of its own
    with np.errstate(over="ignore", invalid="ignore"):
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
    estimated on a random sample of `sample_rows` rows when the matrix is larger (None = all rows). Rows that are not
    :func:`usable_rows` (NaN, infinities: corrupt weights) take part in neither."""
    n, d = m.shape
    mu = np.zeros(d, dtype=np.float64)
    usable = np.empty(n, dtype=bool)
    for s, b in m.blocks():
        ok = usable_rows(b)
        usable[s : s + len(b)] = ok
        mu += b[ok].sum(axis=0, dtype=np.float64)
    rows = np.flatnonzero(usable)
    mu /= max(len(rows), 1)
    mu32 = mu.astype(np.float32)
    if sample_rows and len(rows) > sample_rows:
        rows = np.sort(np.random.default_rng(seed).choice(rows, sample_rows, replace=False))
    if len(rows) < n:  # a sample, or corrupt rows left out once (they give no direction)
        m = Matrix(m.take(rows), "F32", m.name)
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
    m: Matrix,
    ref_ids: list[int],
    *,
    mu: np.ndarray | None = None,
    pc: np.ndarray | None = None,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine distance and L2 distance of every row to the mean of the usable reference rows (optionally in
    PC1-removed space); a row that is not finite gets a non-finite distance, which the report leaves out."""
    refs = m.take(ref_ids)
    refs = refs[usable_rows(refs)]
    if not len(refs):
        raise DataError(
            f"none of the {len(ref_ids)} reference rows holds finite values (NaN or infinite: corrupt weights?): "
            "give other reference tokens"
        )
    if pc is not None:
        refs = refs - mu
        refs -= np.outer(refs @ pc, pc)
    u = refs.astype(np.float64).mean(axis=0).astype(np.float32)
    un = float(np.linalg.norm(u))
    uu = np.float32(un * un)
    n = m.shape[0]
    cos = np.empty(n, dtype=np.float32)
    l2 = np.empty(n, dtype=np.float32)
    if device != "cpu":
        return _distances_gpu(m, u, mu, pc, device, cos, l2)
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


def _distances_gpu(
    m: Matrix,
    u: np.ndarray,
    mu: np.ndarray | None,
    pc: np.ndarray | None,
    device: str,
    cos: np.ndarray,
    l2: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The GPU twin of the block loop in :func:`_distances` (same formulas, exact differences for every row)."""
    import torch  # noqa: PLC0415 - heavy, only for the GPU path

    ut = torch.from_numpy(u).to(device)
    mut = torch.from_numpy(mu).to(device) if pc is not None else None
    pct = torch.from_numpy(pc).to(device) if pc is not None else None
    un = ut.norm()
    for s, t in _gpu_blocks(m, device):
        if pct is not None:
            t = t - mut
            t = t - torch.outer(t @ pct, pct)
        e = s + t.shape[0]
        norms = t.norm(dim=1)
        cos[s:e] = (1.0 - (t @ ut) / torch.clamp(norms * un, min=1e-6)).cpu().numpy()
        l2[s:e] = (t - ut).norm(dim=1).cpu().numpy()
    return cos, l2


def compute_indicators(
    w: EmbeddingWeights,
    reference_ids: list[int] | None,
    *,
    remove_pc1: bool = False,
    device: str | None = None,
) -> dict[str, np.ndarray]:
    """Indicators over all rows, in magikarp's order: [input_norm if untied] + cosine(, cosine_nopc1), l2_distance
    (+ input_norm for models without an LM head) (+ bias). Lower = more under-trained.

    `device`: None/`cpu` (numpy), `cuda`/`cuda:N`, or `auto` (CUDA when present and the matrix is large). Rows
    that are not finite (corrupt weights) get non-finite indicators, without numpy's warnings: the report counts
    them in its notes and leaves them out."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _compute_indicators(w, reference_ids, remove_pc1=remove_pc1, device=device)


def _compute_indicators(
    w: EmbeddingWeights, reference_ids: list[int] | None, *, remove_pc1: bool, device: str | None
) -> dict[str, np.ndarray]:
    dev = resolve_device(device, w.unembedding.nbytes)
    out: dict[str, np.ndarray] = {}
    untied = w.input is not None and w.output is not None
    if untied:
        out["input_norm"] = row_norms(w.input, dev)
    if reference_ids:
        m = w.unembedding
        bad = [i for i in reference_ids if not 0 <= i < m.shape[0]]
        if bad:
            raise DataError(f"reference ids outside the {m.shape[0]} embedding rows: {bad[:5]}")
        cos, l2 = _distances(m, list(reference_ids), device=dev)
        out["cosine"] = cos
        if remove_pc1:
            mu, pc = first_principal_component(m)  # direction from a 16k-row sample on big matrices
            out["cosine_nopc1"], _ = _distances(m, list(reference_ids), mu=mu, pc=pc, device=dev)
        out["l2_distance"] = l2
    elif not untied:
        raise DataError(
            "this model's embeddings are tied (or there is no separate input matrix): "
            "the indicators need reference tokens, and none were found or given"
        )
    if w.input is not None and not untied and not w.has_lm_head:
        # no LM head (encoders): the input rows only get input gradients, so their norm is informative too
        out["input_norm"] = row_norms(w.input, dev)
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
