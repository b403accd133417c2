"""A tokenizer as GGUF metadata, the way llama.cpp reads it (`tokenizer.ggml.*`), and a vocabulary-only GGUF file.

llama.cpp runs its own re-implementation of each tokenizer; the GGUF tells it which one (`tokenizer.ggml.model`:
``gpt2`` byte-level BPE, ``llama`` SentencePiece-style BPE/SPM with `<0xNN>` byte pieces, ``bert`` WordPiece) and
which pre-tokenizer regex to use (`tokenizer.ggml.pre`). llama.cpp's converter (`convert_hf_to_gguf.py`,
`get_vocab_base_pre`) names the pre-tokenizer by hashing the ids a tokenizer gives for one fixed test text
(:data:`CHECK_TEXT`); an edited vocabulary splits that text differently, the hash is unknown and the conversion stops
("unknown pre-tokenizer", ggml-org/llama.cpp #8649). Here the name comes from the base: the base GGUF's own
`tokenizer.ggml.pre` when the source is a GGUF file, otherwise the hash of the ORIGINAL (unedited) tokenizer looked
up in :data:`KNOWN_PRE_HASHES` — the hashes of the shared tokenizers this project verified — so an edit never makes
it unknown.

The token list is in id order with no holes (a hole becomes ``[PAD<id>]``, type unused); token types: normal,
control (special added tokens and those that look special, as llama.cpp's converter marks them), user-defined (other
added tokens), byte (`<0xNN>`), unknown (the model's unk) and unused. Merges are written as ``"a b"`` strings (a
space inside a part as U+0120+256… exactly as gguf-py encodes it: the space's code point + 256).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.core.outputs import atomic_write_bytes
from analysis.errors import DataError, TokenizerLoadError

from .alphabets import SPIECE_UNDERLINE
from .gguf_file import read_gguf_header
from .tokenizer import LoadedTokenizer

#: The text llama.cpp's converter tokenizes to identify a pre-tokenizer (its `get_vocab_base_pre`, `chktxt`):
#: the hash is sha256 of Python's `str()` of the id list, special tokens added as `AutoTokenizer.encode` adds them.
CHECK_TEXT = (
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 "
    "333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= "
    "нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure "
    "I'll make it, 'D you like some tea? We'Ve a'lL"
)

#: chkhsh → `tokenizer.ggml.pre`, for the tokenizers whose hash this project computed from the shared assets and
#: found under that name in llama.cpp's converter table (tests/tokenizer/test_gguf_export.py recomputes each).
KNOWN_PRE_HASHES: dict[str, str] = {
    "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5": "llama-bpe",  # Llama-3 / 3.1
    "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea": "qwen2",  # Qwen2 / Qwen3
    "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454": "gpt-2",  # GPT-2
    "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249": "smollm",  # SmolLM / SmolLM2
    "0e9433cbbb161f89e264eb32e8e64bfe69e834973ffca5d41d3948a604a3e2a3": "pixtral",  # Mistral-Nemo (Tekken)
}

#: GGUF token types (gguf.TokenType; llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {
    NORMAL: "normal",
    UNKNOWN: "unknown",
    CONTROL: "control",
    USER_DEFINED: "user-defined",
    UNUSED: "unused",
    BYTE: "byte",
}
#: `tokenizer.ggml.<key>_token_id` keys and the tokenizer-config keys they come from.
SPECIAL_ID_KEYS = {
    "bos": "bos_token",
    "eos": "eos_token",
    "unknown": "unk_token",
    "seperator": "sep_token",  # sic: llama.cpp's key name
    "padding": "pad_token",
    "mask": "mask_token",
}
#: The architecture a vocabulary-only file names, per tokenizer model (llama.cpp needs one to load the file).
VOCAB_ONLY_ARCH = {"gpt2": "llama", "llama": "llama", "bert": "bert"}
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def check_hash(tok: LoadedTokenizer) -> str:
    """llama.cpp's pre-tokenizer hash (`chkhsh`) of a tokenizer: sha256 of `str(ids)` of :data:`CHECK_TEXT`,
    encoded with the tokenizer's special tokens added (as `AutoTokenizer.encode` does)."""
    ids = tok.tokenizer.encode(CHECK_TEXT, add_special_tokens=True).ids
    return hashlib.sha256(str(list(ids)).encode()).hexdigest()


def gguf_model_kind(tok: LoadedTokenizer) -> str:
    """`tokenizer.ggml.model` for a tokenizer: ``gpt2`` (byte-level BPE), ``llama`` (SentencePiece-style BPE with
    byte fallback) or ``bert`` (WordPiece); DataError for the kinds llama.cpp cannot read from a tokenizer.json."""
    if tok.model_type == "BPE" and tok.is_byte_level:
        return "gpt2"
    if tok.model_type == "BPE" and (tok.byte_fallback or tok.is_sentencepiece_style):
        return "llama"
    if tok.model_type == "WordPiece":
        return "bert"
    raise DataError(
        f"{tok.name}: a {tok.model_type} tokenizer ({tok.flavour}) has no GGUF form this app writes "
        "(byte-level BPE, SentencePiece-style BPE and WordPiece do)"
    )


def identify_pre(base: LoadedTokenizer) -> str:
    """`tokenizer.ggml.pre` for a tokenizer identified from its ORIGINAL, unedited form `base`: ``default`` for
    SentencePiece-style and WordPiece models (llama.cpp does not read a regex for them), the name of the hash in
    :data:`KNOWN_PRE_HASHES` for byte-level BPE; DataError naming the hash when it is not known."""
    kind = gguf_model_kind(base)
    if kind != "gpt2":
        return "default"
    h = check_hash(base)
    if h in KNOWN_PRE_HASHES:
        return KNOWN_PRE_HASHES[h]
    raise DataError(
        f"{base.name}: llama.cpp's pre-tokenizer hash {h[:16]}… is not one this app knows "
        f"({', '.join(sorted(set(KNOWN_PRE_HASHES.values())))}); name it explicitly (pre=…, --gguf-pre)"
    )


def looks_special(text: str) -> bool:
    """Added tokens llama.cpp's converter marks control even when not flagged special (`<|…|>`, `<｜…｜>`,
    `<pad>`, `<mask>`, `<unused…>`)."""
    return (
        text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (text.startswith("<|") and text.endswith("|>"))
        or (text.startswith("<｜") and text.endswith("｜>"))
        or (text.startswith("<unused") and text.endswith(">"))
    )


@dataclass
class GgufVocab:
    """Everything `tokenizer.ggml.*` holds for one tokenizer (see :func:`gguf_vocab`)."""

    model: str
    pre: str
    tokens: list[str]
    types: list[int]
    merges: list[str] = field(default_factory=list)
    scores: list[float] | None = None
    special_ids: dict[str, int] = field(default_factory=dict)
    add_bos: bool = False
    add_eos: bool = False
    add_space_prefix: bool | None = None
    chat_template: str | None = None

    def type_counts(self) -> dict[str, int]:
        """Token type name → how many tokens have it."""
        out: dict[str, int] = {}
        for t in self.types:
            out[TYPE_NAMES[t]] = out.get(TYPE_NAMES[t], 0) + 1
        return out

    def to_json(self) -> dict:
        """A summary (sizes, kinds, flags, special ids; no token list)."""
        return {
            "model": self.model,
            "pre": self.pre,
            "tokens": len(self.tokens),
            "merges": len(self.merges),
            "types": self.type_counts(),
            "special_ids": dict(self.special_ids),
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "add_space_prefix": self.add_space_prefix,
            "chat_template": self.chat_template is not None,
        }


def _content(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def _template_flags(tok: LoadedTokenizer, ids: dict[str, int]) -> tuple[bool, bool]:
    """(add BOS, add EOS) as the tokenizer's post-processor adds special tokens around a single text."""
    probe = tok.tokenizer.encode("a", add_special_tokens=True).ids
    bare = tok.tokenizer.encode("a", add_special_tokens=False).ids
    if not probe or probe == bare:
        return False, False
    bos, eos = ids.get("bos"), ids.get("eos")
    first = len(probe) > len(bare) and probe[0] not in bare[:1]
    last = len(probe) > len(bare) and probe[-1] not in bare[-1:]
    return bool(first and probe[0] in (bos, ids.get("cls"))), bool(
        last and probe[-1] in (eos, ids.get("sep"))
    )


def _prepends_space(tok: LoadedTokenizer) -> bool:
    """Whether a SentencePiece-style tokenizer puts ▁ before the first word (Metaspace prepend, or a Prepend
    normalizer)."""
    text = json.dumps([tok.normalizer, tok.pre_tokenizer], ensure_ascii=False)
    if '"Prepend"' in text and SPIECE_UNDERLINE in text:
        return True
    for sec in (tok.pre_tokenizer,):
        for node in _walk(sec):
            if node.get("type") == "Metaspace":
                scheme = node.get("prepend_scheme")
                return (
                    scheme in ("first", "always")
                    if scheme is not None
                    else bool(node.get("add_prefix_space"))
                )
    return False


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _merge_string(a: str, b: str) -> str:
    def enc(part: str) -> str:
        return "".join(chr(ord(c) + 256) if c == " " else c for c in part)

    return f"{enc(a)} {enc(b)}"


def gguf_vocab(
    tok: LoadedTokenizer,
    *,
    pre: str | None = None,
    base: LoadedTokenizer | None = None,
    config: dict | None = None,
    chat_template: str | None = None,
    n_rows: int | None = None,
) -> GgufVocab:
    """The GGUF tokenizer metadata for `tok`.

    `pre` names llama.cpp's pre-tokenizer; without it, it is identified from `base` (the original, unedited
    tokenizer: :func:`identify_pre`), or from `tok` itself when no base is given. `config` is the tokenizer
    config (special tokens, `add_bos_token`/`add_eos_token`, the inline chat template; default `tok.config`);
    `chat_template` overrides its template. `n_rows` pads the token list to the model's embedding rows (holes and
    rows past the tokenizer become ``[PAD<id>]``, unused), as llama.cpp's converter does for a model whose
    `vocab_size` exceeds the tokenizer.
    """
    kind = gguf_model_kind(tok)
    cfg = dict(tok.config if config is None else config)
    pre_name = pre or identify_pre(base or tok)
    id_to_token = tok.id_to_token
    size = max(id_to_token) + 1 if id_to_token else 0
    if n_rows is not None:
        if n_rows < size:
            raise DataError(
                f"{tok.name}: ids go up to {size - 1} but the model has only {n_rows} embedding rows"
            )
        size = n_rows
    added = {a.id: a for a in tok.added_tokens}
    unk = tok.unk_token
    tokens: list[str] = []
    types: list[int] = []
    for i in range(size):
        s = id_to_token.get(i)
        if s is None:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        a = added.get(i)
        if a is not None and (a.special or looks_special(a.content)):
            types.append(CONTROL)
        elif a is not None:
            types.append(USER_DEFINED)
            if kind == "llama":
                s = s.replace(SPIECE_UNDERLINE, " ")  # llama.cpp reads user-defined tokens as plain text
        elif kind == "llama" and _BYTE_PIECE.fullmatch(s):
            types.append(BYTE)
        elif unk is not None and s == unk:
            types.append(UNKNOWN if kind == "llama" else CONTROL)
        else:
            types.append(NORMAL)
        if kind == "bert" and a is None:  # llama.cpp's WordPiece: word starts carry ▁, continuations lose ##
            prefix = tok.continuing_subword_prefix or "##"
            s = s[len(prefix) :] if s.startswith(prefix) and len(s) > len(prefix) else SPIECE_UNDERLINE + s
        tokens.append(s)
    vocab = GgufVocab(model=kind, pre=pre_name, tokens=tokens, types=types)
    if kind == "gpt2":
        vocab.merges = [_merge_string(a, b) for a, b in tok.merges]
        if not vocab.merges:  # llama.cpp refuses a BPE vocabulary without tokenizer.ggml.merges, and GGUF has
            raise DataError(  # no empty array
                f"{tok.name}: a BPE tokenizer without merges cannot be written as GGUF (llama.cpp requires "
                "tokenizer.ggml.merges, and a GGUF array cannot be empty)"
            )
    elif kind == "llama":
        vocab.scores = _spm_scores(tok, size)
        vocab.add_space_prefix = _prepends_space(tok)
    ids = tok.tokenizer
    for key, cfg_key in SPECIAL_ID_KEYS.items():
        c = _content(cfg.get(cfg_key))
        if c is None and key == "unknown" and unk is not None:
            c = unk
        tid = ids.token_to_id(c) if c is not None else None
        if tid is not None:
            vocab.special_ids[key] = int(tid)
    for key, cfg_key in (("bos", "cls_token"), ("eos", "sep_token")):  # BERT: CLS/SEP stand for BOS/EOS
        c = _content(cfg.get(cfg_key))
        if key not in vocab.special_ids and c is not None and ids.token_to_id(c) is not None:
            vocab.special_ids[key] = int(ids.token_to_id(c))
    add_bos, add_eos = _template_flags(
        tok, {**vocab.special_ids, **_ids_of(tok, cfg, ("cls_token", "cls"), ("sep_token", "sep"))}
    )
    vocab.add_bos = cfg["add_bos_token"] if isinstance(cfg.get("add_bos_token"), bool) else add_bos
    vocab.add_eos = cfg["add_eos_token"] if isinstance(cfg.get("add_eos_token"), bool) else add_eos
    template = chat_template if chat_template is not None else cfg.get("chat_template")
    vocab.chat_template = template if isinstance(template, str) and template else None
    return vocab


def _ids_of(tok: LoadedTokenizer, cfg: dict, *pairs: tuple[str, str]) -> dict[str, int]:
    out = {}
    for cfg_key, name in pairs:
        c = _content(cfg.get(cfg_key))
        tid = tok.tokenizer.token_to_id(c) if c is not None else None
        if tid is not None:
            out[name] = int(tid)
    return out


def _spm_scores(tok: LoadedTokenizer, size: int) -> list[float]:
    """Scores for llama.cpp's SentencePiece tokenizer from BPE merges: a token made by merge k scores -k (the
    earlier the merge, the higher), so llama.cpp's best-score-first bigram merging replays the merge order; tokens
    no merge makes (characters, bytes, added tokens) score below every merged one."""
    n = len(tok.merges)
    scores = [-float(n + i) for i in range(size)]
    vocab = tok.vocab
    for k, (a, b) in enumerate(tok.merges):
        tid = vocab.get(a + b)
        if tid is not None and tid < size and scores[tid] < -k:
            scores[tid] = -float(k)
    return scores


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------
def add_vocab_to_writer(writer: Any, vocab: GgufVocab) -> None:
    """Write `vocab` as `tokenizer.ggml.*` (and `tokenizer.chat_template`) into a `gguf.GGUFWriter`."""
    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    if vocab.scores is not None:
        writer.add_token_scores(vocab.scores)
    if vocab.merges:
        writer.add_token_merges(vocab.merges)
    setters = {
        "bos": writer.add_bos_token_id,
        "eos": writer.add_eos_token_id,
        "unknown": writer.add_unk_token_id,
        "seperator": writer.add_sep_token_id,
        "padding": writer.add_pad_token_id,
        "mask": writer.add_mask_token_id,
    }
    for key, tid in vocab.special_ids.items():
        setters[key](tid)
    writer.add_add_bos_token(vocab.add_bos)
    writer.add_add_eos_token(vocab.add_eos)
    if vocab.add_space_prefix is not None:
        writer.add_add_space_prefix(vocab.add_space_prefix)
    if vocab.chat_template:
        writer.add_chat_template(vocab.chat_template)


def _vocab_only_hparams(writer: Any, arch: str, n_vocab: int) -> None:
    """The few hyper-parameters llama.cpp reads before the vocabulary (a vocabulary-only file has no tensors)."""
    writer.add_context_length(4096)
    writer.add_embedding_length(64)
    writer.add_block_count(1)
    writer.add_feed_forward_length(128)
    writer.add_head_count(1)
    writer.add_vocab_size(n_vocab)
    if arch == "bert":
        writer.add_head_count_kv(1)
        writer.add_layer_norm_eps(1e-12)
        writer.add_causal_attention(False)
    else:
        writer.add_head_count_kv(1)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_rope_dimension_count(64)


def gguf_bytes_vocab_only(vocab: GgufVocab, name: str = "tokenizer") -> bytes:
    """A vocabulary-only GGUF (no tensors), as llama.cpp's own tokenizer test files are: loads with
    `vocab_only=True`."""
    import tempfile  # noqa: PLC0415 - gguf writes through a file

    import gguf  # noqa: PLC0415 - loaded on use

    arch = VOCAB_ONLY_ARCH[vocab.model]
    with tempfile.TemporaryDirectory(prefix="toklab-gguf-") as tmp:
        path = Path(tmp) / "vocab.gguf"
        writer = gguf.GGUFWriter(str(path), arch)
        writer.add_type(gguf.GGUFType.MODEL)
        writer.add_name(name[:200])
        _vocab_only_hparams(writer, arch, len(vocab.tokens))
        add_vocab_to_writer(writer, vocab)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path.read_bytes()


def write_vocab_gguf(
    tok: LoadedTokenizer,
    path: str | os.PathLike,
    *,
    pre: str | None = None,
    base: LoadedTokenizer | None = None,
    config: dict | None = None,
) -> Path:
    """Write `tok` as a vocabulary-only GGUF file (atomically); returns its path. See :func:`gguf_vocab`."""
    vocab = gguf_vocab(tok, pre=pre, base=base, config=config)
    return atomic_write_bytes(path, gguf_bytes_vocab_only(vocab, tok.name))


#: The vocabulary's lists: counted by :func:`read_gguf_vocab_meta`, never read
VOCAB_LISTS = (
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores",
)


def _vocab_meta_key(key: str) -> bool:
    return (
        key.startswith("tokenizer.") or key.startswith("general.architecture") or key.endswith("vocab_size")
    ) and key not in VOCAB_LISTS


def read_gguf_vocab_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The scalar `tokenizer.ggml.*` values of a GGUF file (model, pre, special ids, flags, the chat template),
    the architecture, any `*vocab_size`, and the sizes of its lists, in the file's order; read from the header
    (:mod:`analysis.tokenizer.gguf_file`: 0.1 s for Llama-3.1's vocabulary, where gguf-py's reader took 12 s)."""
    try:
        head = read_gguf_header(path, _vocab_meta_key, counted=VOCAB_LISTS, tensors=False)
    except OSError as e:
        raise TokenizerLoadError(f"{Path(path).name}: cannot read the file ({e.strerror or e})") from e
    except TokenizerLoadError as e:
        raise TokenizerLoadError(f"{Path(path).name}: not a readable GGUF file ({e})") from e
    found = {**head.values, **head.counts}
    return {k: found[k] for k in head.keys if k in found}
