"""Custom masks without a GPU: packing, the IR, the compiled kernels' ABI.

The GPU check against a float32 reference is test_gpu_tree.py.
"""

import ctypes
import glob
import json
import os
import re

import pytest

import attn
from attn.mask import mask_indptr, packbits, segment_packbits
from attn.paged import make_spec


def test_packing_is_little_endian_per_request_byte():
    # Request 0: 2 x 3 = 6 bits; request 1: 1 x 9 = 9 bits (two bytes).
    bits = [1, 0, 1, 1, 0, 0] + [1, 1, 1, 1, 1, 1, 1, 1, 0]
    packed, indptr = segment_packbits(bits, [0, 6, 15], bitorder="little")
    assert packed == [0b001101, 0xFF, 0]
    assert indptr == mask_indptr([2, 1], [3, 9]) == [0, 1, 3]
    assert packbits([0, 0, 0, 0, 0, 0, 0, 0, 1], bitorder="little") == [0, 1]
    # FlashInfer's default is numpy's big-endian order.
    assert packbits([0, 0, 0, 0, 0, 0, 0, 0, 1]) == [0, 0x80]
    with pytest.raises(ValueError, match="bitorder must be 'big' or 'little'"):
        packbits([1], bitorder="middle")


def test_packing_matches_element_bit_formula():
    """Element (i, j) of request b is bit mask_indptr[b] * 8 + i * kv_len + j."""
    import random
    rng = random.Random(3)
    qo, kv = [3, 5, 1], [7, 12, 20]
    flat, bounds = [], [0]
    for q, k in zip(qo, kv):
        flat += [rng.random() < 0.5 for _ in range(q * k)]
        bounds.append(len(flat))
    packed, indptr = segment_packbits(flat, bounds, bitorder="little")
    for b, (q, k) in enumerate(zip(qo, kv)):
        for i in range(q):
            for j in range(k):
                bit = indptr[b] * 8 + i * k + j
                assert ((packed[bit // 8] >> (bit % 8)) & 1) == flat[bounds[b] + i * k + j]


def test_spec_ir_has_the_mask_operand_and_drops_causal():
    spec, _ = make_spec(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=1, dtype="bf16",
                        kv_layout="NHD", query_rows=128, causal=True, custom_mask=True)
    ir = spec.to_ir()
    assert "%mask: tensor<?xi8>" in ir and "mask(%mask : tensor<?xi8>)" in ir
    assert "causal" not in ir and "block_cols = 1" in ir
    plain, _ = make_spec(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=1, dtype="bf16",
                         kv_layout="NHD", query_rows=128, causal=True)
    assert "mask" not in plain.to_ir() and "causal" in plain.to_ir()


@pytest.mark.compiler
@pytest.mark.parametrize("query_rows,page_size", [(128, 1), (128, 16), (1, 1)])
def test_masked_kernels_take_custom_mask_args(native, query_rows, page_size):
    spec, _ = make_spec(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=page_size, dtype="bf16",
                        kv_layout="NHD", query_rows=query_rows, custom_mask=True, window_left=64)
    r = native.compile(spec.to_ir(), chip="sm_90", emit_cubin=False)
    assert r["ok"], r["diagnostics"]
    m = json.loads(r["manifest"])
    k = next(k for k in m["kernels"] if k["role"] == "attention")
    assert k["name"].endswith("_mask")
    names = [a["name"] for a in k["args"]]
    assert names.index("custom_mask") + 1 == names.index("mask_indptr") < names.index("sm_scale")
    assert next(a for a in k["args"] if a["name"] == "custom_mask")["dtype"] == "u8"
    assert re.search(r"ld\.global(\.nc)?\.[ub]8", r["ptx"]), "the kernel reads no mask byte"


@pytest.mark.compiler
def test_unpacked_mask_is_a_clear_error(native):
    ir = make_spec(num_qo_heads=8, num_kv_heads=8, head_dim=64, page_size=1, dtype="bf16", kv_layout="NHD",
                   query_rows=128, custom_mask=True)[0].to_ir().replace("tensor<?xi8>", "tensor<?xi1>")
    r = native.compile(ir, chip="sm_90", emit_cubin=False)
    assert not r["ok"] and "pack it into i8" in r["diagnostics"]


class _Desc(ctypes.Structure):
    _fields_ = [("head_dim", ctypes.c_int32), ("num_qo_heads", ctypes.c_int32),
                ("num_kv_heads", ctypes.c_int32), ("page_size", ctypes.c_int32),
                ("query_rows", ctypes.c_int32), ("dtype", ctypes.c_char_p), ("layout", ctypes.c_char_p),
                ("variants", ctypes.c_char_p), ("variant_defs", ctypes.c_char_p),
                ("custom_mask", ctypes.c_int32)]


class _Options(ctypes.Structure):
    _fields_ = [("chip", ctypes.c_char_p), ("features", ctypes.c_char_p), ("cuda_path", ctypes.c_char_p),
                ("opt_level", ctypes.c_int32), ("emit_cubin", ctypes.c_int32),
                ("manifest_only", ctypes.c_int32), ("candidate", ctypes.c_int32)]


@pytest.mark.compiler
def test_c_api_description_with_a_mask():
    build = os.environ.get("ATTN_BUILD_DIR",
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
    libs = glob.glob(os.path.join(build, "**", "libattn_compiler.so*"), recursive=True)
    if not libs:
        pytest.skip(f"no libattn_compiler.so under {build}")
    lib = ctypes.CDLL(sorted(libs)[0])
    lib.attnCompilerCompileAttention.argtypes = [ctypes.POINTER(_Desc), ctypes.POINTER(_Options),
                                                 ctypes.POINTER(ctypes.c_void_p)]
    for fn in ("attnCompilerResultIR", "attnCompilerResultManifest", "attnCompilerResultDiagnostics"):
        getattr(lib, fn).restype = ctypes.c_char_p
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
    lib.attnCompilerResultDestroy.argtypes = [ctypes.c_void_p]
    opts = _Options()
    lib.attnCompilerOptionsInit(ctypes.byref(opts))
    opts.emit_cubin = 0
    desc = _Desc(128, 32, 8, 1, 128, b"bf16", b"NHD", None, None, 1)
    result = ctypes.c_void_p()
    status = lib.attnCompilerCompileAttention(ctypes.byref(desc), ctypes.byref(opts), ctypes.byref(result))
    try:
        assert status == 0, lib.attnCompilerResultDiagnostics(result).decode()
        assert b"mask(" in lib.attnCompilerResultIR(result)
        assert b'"custom_mask"' in lib.attnCompilerResultManifest(result)
    finally:
        lib.attnCompilerResultDestroy(result)


def test_plan_rejects_a_mask_of_the_wrong_size():
    torch = pytest.importorskip("torch")
    from attn.mask import prepare_mask
    with pytest.raises(ValueError, match="custom_mask has 5 elements; the batch has 6"):
        prepare_mask(torch.ones(5, dtype=torch.bool), None, [2], [3], "cpu")
    with pytest.raises(ValueError, match="packed_custom_mask has 1 bytes; the batch's masks need 2"):
        prepare_mask(None, torch.ones(1, dtype=torch.uint8), [3], [3], "cpu")
    packed, indptr = prepare_mask(torch.tensor([1, 0, 1, 1, 0, 0], dtype=torch.bool), None, [2], [3], "cpu")
    assert packed.tolist() == [13] and indptr == [0, 1]
