"""Model check: load an original model and an edit's exported model, check them before allocating, and measure
the edit per language (:mod:`analysis.evaluate.comparison`), with an initialisation bake-off of the new rows and a
warm-up of the new rows only (:mod:`analysis.adapt.warmup`). :class:`ModelCheck` is the one typed result; its
:meth:`ModelCheck.to_json` is the document the CLI prints (``model-check --json``) and the pages download.

Checks before any model is built: the edited folder holds a tokenizer *and* weights (a tokenizer-only export is
refused), each model's embedding matrix (read from the file headers, not the weights) has a row for every id of
its tokenizer, and both models fit the memory they will be placed in (``--max-memory`` caps, else the free GPU
memory or the available RAM).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.adapt.embeddings import INITS, init_rows
from analysis.adapt.vocab_map import EditedVocab, new_ids
from analysis.core.progress import Progress, report
from analysis.errors import DataError, ModelLoadError, TokenizerLoadError
from analysis.model.bpb import STRIDE, WINDOW
from analysis.model.models import _MEM_SPEC, load_causal_lm, parameter_bytes, pick_device
from analysis.model.source import ModelSource, resolve_model, tokenizer_for_model
from analysis.model.weights import load_embeddings
from analysis.texts.flores import FLORES_TRAIN_LINES, canonical_code, split_lines
from analysis.tokenizer.gguf_source import gguf_tensor_shapes
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .comparison import CheckRun, LanguageCheck, NewTokenUse, Variant, compare
from .flags import MASS_LIMIT, FlaggedLanguage, FlaggedRow, flag_languages, flag_rows

#: OMP's screening in a bake-off of an edit with its own reading of new tokens (a transplant: ~10⁵ of them).
OWN_CANDIDATES = 128
#: Held-out FLORES lines per language (lines 801–1012 of devtest).
HELDOUT_LINES = 1012 - FLORES_TRAIN_LINES
#: The languages a model check measures by default (`model-check --langs`, `transplant --langs`, the pages'
#: Model check section); the first one is the warm-up's training text.
DEFAULT_LANGS = ("est_Latn", "eng_Latn")
#: Held-out lines per language the pages' Model check starts with: a check of two languages then takes about a
#: minute on two shared cores; the command line measures all :data:`HELDOUT_LINES` unless --lines (a page's
#: equivalent command states its lines).
PAGE_LINES = 20


@dataclass
class Loaded:
    """A model and its tokenizer, ready to read text."""

    model: Any
    tok: LoadedTokenizer
    device: str
    label: str
    #: how its ids relate to the original's when not by token string (an R-BPE folder); None: by string
    vocab: EditedVocab | None = None

    def vocab_against(self, original: Loaded) -> EditedVocab:
        """Its :class:`EditedVocab` against `original`."""
        return self.vocab or EditedVocab.from_tokenizers(original.tok, self.tok)


#: Reads an edit's folder whose tokenizer is not one tokenizer.json: (the tokenizer whose ids the model uses,
#: the id correspondence built against the original tokenizer given).
EditedReader = Callable[[Path, LoadedTokenizer], tuple[LoadedTokenizer, EditedVocab]]


def available_memory() -> int | None:
    """Bytes of RAM the kernel reports as available (Linux ``MemAvailable``), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _rows(src: ModelSource) -> int:
    """Embedding rows of a checkpoint, from its headers (never the weights; a GGUF file's tensor infos only)."""
    if src.kind == "gguf":
        try:
            shapes = gguf_tensor_shapes(src.files[0])
        except (OSError, TokenizerLoadError) as e:
            raise ModelLoadError(f"{src.label}: not a readable GGUF file ({e})") from e
        for name in ("token_embd.weight", "output.weight"):
            if len(shapes.get(name, ())) == 2:
                return int(shapes[name][1])  # GGUF order: (width, rows)
        raise ModelLoadError(f"{src.label}: no embedding matrix found")
    w = load_embeddings(src)
    m = w.input if w.input is not None else w.output
    if m is None:
        raise ModelLoadError(f"{src.label}: no embedding matrix found")
    return int(m.shape[0])


def resolve_pair(original: str | os.PathLike, edited: str | os.PathLike, reader: EditedReader | None = None) -> tuple[ModelSource, ModelSource, LoadedTokenizer, LoadedTokenizer, EditedVocab | None]:  # fmt: skip
    """The two sources and tokenizers (and, with `reader`, the edited folder's id correspondence), checked: the
    edited folder holds weights and a tokenizer, and each tokenizer fits its model's embedding rows.
    DataError/ModelLoadError otherwise (nothing is allocated)."""
    src_o = resolve_model(original)
    tok_o = tokenizer_for_model(src_o)
    e = Path(str(edited)).expanduser()
    if not e.is_dir():
        raise DataError(
            f"--edited {edited}: not a folder (give an edit's --out folder written with its model)"
        )
    vocab = None
    try:
        if reader is not None:
            tok_e, vocab = reader(e, tok_o)
        else:
            tok_e = load(e)
    except TokenizerLoadError as err:
        raise DataError(f"{edited}: no tokenizer in the edit's folder ({err})") from err
    try:
        src_e = resolve_model(e)
    except ModelLoadError as err:
        raise DataError(
            f"{edited} holds a tokenizer but no model weights (a tokenizer-only export): export the edit with "
            "its model (--model M) to check the model"
        ) from err
    for src, tok, what in ((src_o, tok_o, "original"), (src_e, tok_e, "edited")):
        rows, top = _rows(src), max(tok.id_to_token) + 1
        if top > rows:
            raise DataError(
                f"the {what} model {src.label} has {rows:,} embedding rows but its tokenizer has ids up to "
                f"{top - 1:,}: the vocabulary does not match the model"
            )
    return src_o, src_e, tok_o, tok_e, vocab


def check_memory(sources: Sequence[ModelSource], device: str, max_memory: dict[Any, str] | None) -> int:
    """Bytes both models need on `device` (float32 on the CPU, bfloat16 on a GPU, × 1.2 for activations);
    DataError when that exceeds the cap given in `max_memory` (``cpu`` or the GPU index), else the free GPU
    memory or the available RAM."""
    on_gpu = device.startswith("cuda")
    need = int(sum(parameter_bytes(s, 2 if on_gpu else 4) for s in sources) * 1.2)
    cap: int | None = None
    key: Any = "cpu"
    if on_gpu:
        import torch  # noqa: PLC0415 - heavy, only on a GPU

        index = torch.device(device).index or 0
        key = index
        cap = int(torch.cuda.mem_get_info(index)[0])
    else:
        cap = available_memory()
    if max_memory and key in max_memory:
        m = _MEM_SPEC.match(str(max_memory[key]))
        units = {
            "B": 1,
            "KB": 1e3,
            "MB": 1e6,
            "GB": 1e9,
            "TB": 1e12,
            "KIB": 2**10,
            "MIB": 2**20,
            "GIB": 2**30,
        }
        units["TIB"] = 2**40
        if m:
            cap = int(float(m.group(1)) * units[m.group(2).upper()])
    if cap is not None and need > cap:
        raise DataError(
            f"the two models need about {need / 2**30:.2f} GiB on {device} but only {cap / 2**30:.2f} GiB is "
            "available: too big for this machine's memory (use a GPU, or a smaller model)"
        )
    return need


def load_pair(
    original: str | os.PathLike,
    edited: str | os.PathLike,
    *,
    device: str | None = None,
    max_memory: dict[Any, str] | None = None,
    reader: EditedReader | None = None,
    progress: Progress | None = None,
) -> tuple[Loaded, Loaded]:
    """Check (:func:`resolve_pair`, :func:`check_memory`), then load both models on one device: float32 on the
    CPU, bfloat16 on a GPU, through :func:`analysis.model.models.load_causal_lm`. `reader` reads an edited
    folder that is not one tokenizer (an R-BPE folder). `progress` names each stage."""
    import torch  # noqa: PLC0415 - heavy, only when models load

    report(progress, 0, 3, "checking both models (tokenizers, sizes, memory)")
    src_o, src_e, tok_o, tok_e, vocab = resolve_pair(original, edited, reader)
    dev = pick_device(device)
    check_memory([src_o, src_e], dev, max_memory)
    dtype = torch.bfloat16 if dev.startswith("cuda") else torch.float32
    report(progress, 1, 3, f"loading the original model ({src_o.label}) on {dev}")
    lm_o = load_causal_lm(src_o, dtype=dtype, device=dev)
    report(progress, 2, 3, f"loading the edited model ({src_e.label}) on {dev}")
    lm_e = load_causal_lm(src_e, dtype=dtype, device=dev)
    report(progress, 3, 3, "both models loaded")
    return Loaded(lm_o.model, tok_o, lm_o.device, src_o.label), Loaded(
        lm_e.model, tok_e, lm_e.device, src_e.label, vocab
    )


# --------------------------------------------------------------------------------------------------
# Texts
# --------------------------------------------------------------------------------------------------
def heldout_texts(langs: Sequence[str], lines: int | None = None) -> dict[str, list[str]]:
    """The held-out FLORES devtest lines (801–1012) of each language, the first `lines` of them when given."""
    if lines is not None and lines < 1:
        raise DataError("--lines must be at least 1")
    out: dict[str, list[str]] = {}
    for lang in langs:
        code = canonical_code(lang.strip())
        _, held = split_lines(code)
        out[code] = held[:lines] if lines else held
    return out


def training_texts(langs: Sequence[str]) -> dict[str, list[str]]:
    """The FLORES training lines (the first 800 of devtest) of each language."""
    return {canonical_code(lang): split_lines(canonical_code(lang))[0] for lang in langs}


# --------------------------------------------------------------------------------------------------
# The bake-off
# --------------------------------------------------------------------------------------------------
class RowSwap:
    """Writes other rows into the new ids of the edited model (the bake-off's variants), and back."""

    def __init__(self, original: Loaded, edited: Loaded, *, seed: int = 0) -> None:
        self.original, self.edited, self.seed = original, edited, seed
        vocab = edited.vocab
        #: an edit that reads its new tokens its own way (a transplant): its ids, pieces and OMP dictionary
        self.own = vocab if vocab is not None and vocab.init_pieces is not None else None
        self.ids = list(self.own.new) if self.own is not None else new_ids(original.tok, edited.tok)
        self._pieces: dict[int, list[int]] | None = None
        if not self.ids:
            raise DataError("the edited vocabulary has no new tokens: there are no rows to initialise")
        emb = edited.model.get_input_embeddings()
        head = edited.model.get_output_embeddings()
        self.tied = head is not None and head.weight.data_ptr() == emb.weight.data_ptr()
        self.exported = self._read()

    def _read(self) -> tuple[Any, Any, Any]:
        import torch  # noqa: PLC0415 - heavy, only when models run

        m = self.edited.model
        idx = torch.as_tensor(self.ids, device=m.get_input_embeddings().weight.device)
        e = m.get_input_embeddings().weight.detach()[idx].clone()
        head = m.get_output_embeddings()
        w = None if self.tied or head is None else head.weight.detach()[idx.to(head.weight.device)].clone()
        b = None if head is None or getattr(head, "bias", None) is None else head.bias.detach()[idx].clone()
        return e, w, b

    def write(self, rows: tuple[Any, Any, Any]) -> None:
        """Put (input rows, output rows or None, bias or None) at the new ids."""
        import torch  # noqa: PLC0415 - heavy, only when models run

        e, w, b = rows
        m = self.edited.model
        with torch.no_grad():
            emb = m.get_input_embeddings().weight
            emb[torch.as_tensor(self.ids, device=emb.device)] = e.to(emb.device, emb.dtype)
            head = m.get_output_embeddings()
            if w is not None and not self.tied:
                head.weight[torch.as_tensor(self.ids, device=head.weight.device)] = w.to(
                    head.weight.device, head.weight.dtype
                )
            if b is not None and getattr(head, "bias", None) is not None:
                head.bias[torch.as_tensor(self.ids, device=head.bias.device)] = b.to(
                    head.bias.device, head.bias.dtype
                )

    def rows_for(self, init: str) -> tuple[Any, Any, Any]:
        """The rows `init` gives the new ids, from the ORIGINAL model's matrices."""
        m = self.original.model
        emb = m.get_input_embeddings().weight.detach().float().cpu()
        head = m.get_output_embeddings()
        tied = head is not None and head.weight.data_ptr() == m.get_input_embeddings().weight.data_ptr()
        w = None if tied or head is None else head.weight.detach().float().cpu()
        b = None if head is None or getattr(head, "bias", None) is None else head.bias.detach().float().cpu()
        std = float(getattr(m.config, "initializer_range", None) or 0.02)
        own: dict[str, Any] = {}
        if self.own is not None:
            if self._pieces is None and init in ("fvt", "omp"):
                self._pieces = self.own.init_pieces()
            own = {"pieces": self._pieces, "omp_anchors": self.own.anchors, "omp_candidates": OWN_CANDIDATES}
        e_rows, w_rows, b_rows, _ = init_rows(emb, w, b, self.original.tok, self.edited.tok, self.ids, init,
                                              seed=self.seed, std=std, model=m, **own)  # fmt: skip
        return e_rows, (w_rows if not self.tied else None), b_rows

    def variants(self, inits: Sequence[str]) -> list[Variant]:
        """("exported", restore) then one variant per init (rows computed once, written before each read)."""
        out: list[Variant] = [("exported", lambda: self.write(self.exported))]
        for init in inits:
            if init not in INITS:
                raise DataError(f"unknown init {init!r}; choose from {', '.join(INITS)}")
            rows = self.rows_for(init)
            out.append((init, lambda rows=rows: self.write(rows)))
        return out


# --------------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------------
@dataclass
class ModelCheck:
    """One model check: the edit's measures per language, the bake-off, the warm-up curve."""

    original: str
    edited: str
    device: str
    languages: list[LanguageCheck]
    new_tokens: list[NewTokenUse]
    n_new: int
    n_removed: int
    prefix: dict[str, Any]
    window: int
    stride: int
    seconds: float
    complete: bool = True
    bakeoff: dict[str, list[LanguageCheck]] = field(default_factory=dict)
    bakeoff_tokens: dict[str, list[NewTokenUse]] = field(default_factory=dict)
    warmup: dict[str, Any] | None = None
    out: str | None = None
    #: new id → its under-trained indicator in the edited model (filled by a caller that owns the indicators)
    indicators: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def flagged_new_rows(self) -> list[FlaggedRow]:
        """The new rows that take unusual probability mass (:mod:`analysis.evaluate.flags`), loudest first."""
        return flag_rows(self.new_tokens)

    @property
    def flagged_languages(self) -> list[FlaggedLanguage]:
        """The languages whose old-tokenized text sends more than half the mass to new ids."""
        return flag_languages(self.languages)

    def to_json(self) -> dict[str, Any]:
        """The JSON document of the CLI (``--json``) and the pages' download."""
        doc: dict[str, Any] = {
            "original": self.original,
            "edited": self.edited,
            "device": self.device,
            "complete": self.complete,
            "text": f"FLORES-200 devtest held-out lines {FLORES_TRAIN_LINES + 1}–1012",
            "prefix": self.prefix,
            "window": self.window,
            "stride": self.stride,
            "n_new_tokens": self.n_new,
            "n_removed_tokens": self.n_removed,
            "languages": [c.to_json() for c in self.languages],
            "new_tokens": [
                {**u.to_json(), "undertrained": self.indicators.get(u.id)} for u in self.new_tokens
            ],
            "flagged_new_rows": [r.to_json() for r in self.flagged_new_rows],
            "flagged_languages": [c.to_json() for c in self.flagged_languages],
            "flag_rule": {
                "rows": "argmax at positions where another token is next, more often than it occurs (≥ 1)",
                "languages": f"mean mass on new ids reading the old tokenization > {MASS_LIMIT}",
            },
            "seconds": self.seconds,
        }
        if self.bakeoff:
            inits = list(self.bakeoff)
            langs = [c.lang for c in self.bakeoff[inits[0]]]
            doc["bakeoff"] = {
                "inits": inits,
                "languages": [
                    {
                        "lang": lang,
                        "inits": {i: self.bakeoff[i][k].to_json() for i in inits if k < len(self.bakeoff[i])},
                    }
                    for k, lang in enumerate(langs)
                ],
                "emittable": {
                    i: sum(1 for u in us if u.argmax_count > 0) for i, us in self.bakeoff_tokens.items()
                },
                "flagged": {i: len(flag_rows(us)) for i, us in self.bakeoff_tokens.items()},
            }
        if self.warmup is not None:
            doc["warmup"] = self.warmup
        if self.out:
            doc["out"] = self.out
        return doc


def _from_run(run: CheckRun, name: str) -> tuple[list[LanguageCheck], list[NewTokenUse]]:
    return run.languages.get(name, []), run.new_tokens.get(name, [])


def model_check(
    original: Loaded,
    edited: Loaded,
    texts: dict[str, Sequence[str]],
    *,
    inits: Sequence[str] = (),
    seed: int = 0,
    window: int = WINDOW,
    stride: int = STRIDE,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ModelCheck:
    """Measure the edited model against the original on `texts`; with `inits`, also each initialisation of the
    new rows (a bake-off on the same bytes; the edited model's rows are put back afterwards)."""
    t0 = time.perf_counter()
    variants: list[Variant] = [("edited", None)]
    swap = None
    vocab = edited.vocab_against(original)
    if inits and edited.vocab is not None and edited.vocab.init_pieces is None:
        raise DataError("the initialisation bake-off is for extensions (new ids appended by string); this edit "
                        "keeps its ids and re-initialises their rows: check it without inits")  # fmt: skip
    if inits:
        swap = RowSwap(original, edited, seed=seed)
        variants = swap.variants(inits)
    try:
        run = compare(original.model, original.tok, edited.model, vocab, texts, variants=variants,
                      device_original=original.device, device_edited=edited.device, window=window, stride=stride,
                      progress=progress, should_stop=should_stop)  # fmt: skip
    finally:
        if swap is not None:
            swap.write(swap.exported)
    first = variants[0][0]
    langs, toks = _from_run(run, first)
    res = ModelCheck(
        original=original.label,
        edited=edited.label,
        device=edited.device,
        languages=langs,
        new_tokens=toks,
        n_new=len(vocab.new),
        n_removed=len(vocab.removed),
        prefix=run.prefix_original.to_json() if run.prefix_original else {},
        window=window,
        stride=stride,
        seconds=0.0,
        complete=run.complete,
    )
    for name, _ in variants[1:]:
        res.bakeoff[name], res.bakeoff_tokens[name] = _from_run(run, name)
    if res.bakeoff:
        res.bakeoff = {first: langs, **res.bakeoff}
        res.bakeoff_tokens = {first: toks, **res.bakeoff_tokens}
    res.seconds = time.perf_counter() - t0
    report(progress, 1, 1, "done")
    return res
