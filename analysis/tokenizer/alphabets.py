"""How a token's bytes are written and shown: GPT-2's byte-level alphabet (the 256 byte values as printable
characters), SentencePiece's word-start mark ``▁``, and the readable form of raw bytes (valid UTF-8 runs decoded,
stray bytes as ``⟨NN …⟩``)."""

from __future__ import annotations


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR: dict[int, str] = bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}
#: byte-level characters → the byte they stand for as a latin-1 character (`str.translate` maps a whole token in C)
BYTE_LEVEL_TABLE = str.maketrans({c: chr(b) for c, b in CHAR_TO_BYTE.items()})
#: the byte-level alphabet: a token is byte-level text when all its characters are in it
BYTE_LEVEL_ALPHABET = frozenset(CHAR_TO_BYTE)
SPIECE_UNDERLINE = "\u2581"


def format_bytes(bs: bytes) -> str:
    """Show raw bytes that are not valid UTF-8 on their own, e.g. `⟨E2 80⟩`."""
    return "⟨" + " ".join(f"{b:02X}" for b in bs) + "⟩"


def readable_from_bytes(bs: bytes) -> str:
    """Decode valid UTF-8 runs and show every stray byte run as `⟨NN …⟩`; never produce U+FFFD."""
    try:
        return bs.decode("utf-8")  # fast path: the whole token is valid UTF-8
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    i = 0
    bad = bytearray()
    while i < len(bs):
        # find the longest valid UTF-8 character starting at i
        for width in (1, 2, 3, 4):
            chunk = bs[i : i + width]
            try:
                ch = chunk.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1:
                if bad:
                    out.append(format_bytes(bytes(bad)))
                    bad.clear()
                out.append(ch)
                i += width
                break
        else:
            bad.append(bs[i])
            i += 1
    if bad:
        out.append(format_bytes(bytes(bad)))
    return "".join(out)
