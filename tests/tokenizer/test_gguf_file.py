"""The GGUF header reader (analysis/tokenizer/gguf_file.py): the same values, counts, tensor infos and data
offset as gguf-py's reader, and on a damaged file only `TokenizerLoadError`."""

from __future__ import annotations

import io

import numpy as np
import pytest
from support import SMOLLM, load_shared, need_smollm

from analysis.errors import TokenizerLoadError
from analysis.tokenizer.gguf_export import gguf_bytes_vocab_only, gguf_vocab, read_gguf_vocab_meta
from analysis.tokenizer.gguf_file import read_gguf_header, read_header, tensor_array

gguf = pytest.importorskip("gguf")


def _tiny(path, *, align: int | None = None) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    if align:
        w.add_custom_alignment(align)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "ab", "ü"])
    w.add_array("tokenizer.ggml.scores", [0.5, -1.25, 2.0, 0.0])
    w.add_uint32("tokenizer.ggml.bos_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_array("general.nested", [[1, 2], [3]])
    w.add_tensor("token_embd.weight", np.arange(4 * 8, dtype=np.float32).reshape(4, 8))
    w.add_tensor("output.weight", np.ones((4, 8), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("align", [None, 64])
def test_values_counts_tensors_and_data_equal_gguf_pys(tmp_path, align):
    _tiny(tmp_path / "t.gguf", align=align)
    ref = gguf.GGUFReader(str(tmp_path / "t.gguf"))
    head = read_gguf_header(tmp_path / "t.gguf", lambda k: k != "tokenizer.ggml.tokens",
                            counted={"tokenizer.ggml.tokens"})  # fmt: skip
    fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}  # gguf-py's own entries
    assert head.keys == list(fields)
    flat = {
        k: f.contents() for k, f in fields.items() if k not in ("tokenizer.ggml.tokens", "general.nested")
    }
    assert head.values == {
        **flat,
        "general.nested": [[1, 2], [3]],
    }  # gguf-py flattens a nested array: [1, 2, 3]
    assert head.counts == {"tokenizer.ggml.tokens": 4}
    assert [(t.name, t.shape, t.type) for t in head.tensors] == [
        (t.name, tuple(int(d) for d in t.shape), int(t.tensor_type)) for t in ref.tensors
    ]
    for info, t in zip(head.tensors, ref.tensors):
        assert head.data_offset + info.offset == t.data_offset
        dtype = np.float32 if info.type == 0 else np.float16
        np.testing.assert_array_equal(tensor_array(tmp_path / "t.gguf", head, info, None, dtype), t.data)


def test_a_long_array_is_counted_not_read(tmp_path):
    _tiny(tmp_path / "t.gguf")
    head = read_gguf_header(
        tmp_path / "t.gguf", {"tokenizer.ggml.tokens", "tokenizer.ggml.scores"}, max_array=3
    )
    assert head.counts == {"tokenizer.ggml.tokens": 4, "tokenizer.ggml.scores": 4} and not head.values
    without = read_gguf_header(tmp_path / "t.gguf", {"tokenizer.ggml.tokens"}, arrays=False)
    assert without.values == {} and without.tensors  # skipped, and the tensors still found


def test_every_cut_of_the_file_is_a_load_error_or_a_whole_header(tmp_path):
    _tiny(tmp_path / "t.gguf")
    data = (tmp_path / "t.gguf").read_bytes()
    whole = read_header(io.BytesIO(data), lambda k: True)
    cuts_read = []
    for cut in range(whole.data_offset):
        try:
            head = read_header(io.BytesIO(data[:cut]), lambda k: True)
        except TokenizerLoadError:
            continue
        assert (head.values, head.tensors) == (whole.values, whole.tensors)  # only the padding was cut
        cuts_read.append(cut)
    assert len(cuts_read) < 32  # at most the alignment padding after the last tensor info
    # a length that claims more than the file holds: refused before anything is allocated
    bad = bytearray(data)
    at = data.index(b"tokenizer.ggml.model") - 8
    bad[at : at + 8] = (1 << 62).to_bytes(8, "little")
    with pytest.raises(TokenizerLoadError, match="truncated"):
        read_header(io.BytesIO(bytes(bad)), lambda k: True)


@pytest.mark.slow
def test_vocab_meta_of_a_written_vocabulary_equals_gguf_pys(tmp_path):
    """`read_gguf_vocab_meta` (the Export check's GGUF summary) gives what gguf-py's reader gives, in its order."""
    tok = load_shared("gpt2")
    data = gguf_bytes_vocab_only(gguf_vocab(tok), "gpt2")
    path = tmp_path / "gpt2.gguf"
    path.write_bytes(data)
    ref = gguf.GGUFReader(str(path))
    lists = (
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.scores",
    )
    want = {
        k: (len(f.data) if k in lists else f.contents())
        for k, f in ref.fields.items()
        if k.startswith(("tokenizer.", "general.architecture")) or k.endswith("vocab_size")
    }
    got = read_gguf_vocab_meta(path)
    assert got == want and list(got) == list(want) and got["tokenizer.ggml.tokens"] == tok.vocab_size


@pytest.mark.slow
@need_smollm
def test_smollm2_header_equals_gguf_pys():
    ref = gguf.GGUFReader(str(SMOLLM))
    head = read_gguf_header(SMOLLM, lambda k: not k.startswith("tokenizer.ggml.") or k.endswith("_id"),
                            counted={"tokenizer.ggml.tokens", "tokenizer.ggml.merges"})  # fmt: skip
    assert head.counts == {"tokenizer.ggml.tokens": 49152, "tokenizer.ggml.merges": 48900}
    assert head.values["general.architecture"] == "llama"
    assert {t.name: head.data_offset + t.offset for t in head.tensors} == {
        t.name: t.data_offset for t in ref.tensors
    }
