"""The binding calls the runtime's size-checked entry points (issue 15).

``upload_plan``, ``run`` and ``merge`` take ``device_bytes`` (the workspace
tensor's nbytes) and then call ``attnRt*Sized``: a device workspace smaller
than the plan and its partial buffers is ``WorkspaceTooSmall`` naming both
sizes, raised before any copy or launch. The upload's check comes before the
CUDA driver is touched, so it runs on the CPU (the device address is never
written); run and merge need a loaded module, so they are GPU tests.
"""

import array
import ctypes

import pytest

import attn
from attn import _native

CONFIG = {"num_qo_heads": 32, "num_kv_heads": 8, "head_dim": 128, "block_size": 16, "num_sms": 132,
          "max_batch": 4, "max_total_q_rows": 4,
          "candidates": [{"q_rows": 16, "kv_tile": 64, "gqa_pack": 4, "cost_per_item": 128,
                          "cost_per_kv_token": 1}]}
# 256-byte aligned, never dereferenced: every call below fails its size check first.
FAKE_DEVICE = 1 << 40


@pytest.fixture
def native():
    if not attn.has_native():
        pytest.skip("the attn._attn binding is not built")
    return _native.native()


def i32(*v):
    return array.array("i", v)


def _plan(native):
    """A real plan in a host buffer: (buffer, its address, the summary, the config's device bytes)."""
    host, device = native.plan_workspace_size(CONFIG)
    ws = bytearray(host)
    s = native.plan(CONFIG, ws, i32(0, 1, 2, 3), i32(0, 3, 300, 301), kv_last_len=i32(5, 16, 1))
    assert s["num_merge_units"] >= 1  # a split plan: its partial buffers reach past the plan
    addr = ctypes.addressof((ctypes.c_char * len(ws)).from_buffer(ws))
    return ws, addr, s, device


def test_upload_refuses_a_too_small_device_workspace(native):
    ws, addr, s, device = _plan(native)
    with pytest.raises(native.Error, match=r"\[WorkspaceTooSmall\] device workspace has 256 bytes, "
                                           r"the plan and its partial buffers need \d+") as e:
        native.upload_plan(addr, s["plan_bytes"], FAKE_DEVICE, 0, device_bytes=256)
    assert e.value.status == "WorkspaceTooSmall"
    need = int(str(e.value).split("need ")[1].split()[0])
    assert s["plan_bytes"] < need <= device
    # One byte short of the plan's need is refused too; the check is exact.
    with pytest.raises(native.Error, match=f"has {need - 1} bytes"):
        native.upload_plan(addr, s["plan_bytes"], FAKE_DEVICE, 0, device_bytes=need - 1)


def test_plan_with_an_upload_checks_the_device_workspace_first(native):
    """plan(..., device_workspace=) plans and queues the plan's copy without
    validating the planner's own plan again; the device workspace's size is
    still checked, before any copy."""
    host, device = native.plan_workspace_size(CONFIG)
    ws = bytearray(host)
    with pytest.raises(native.Error, match=r"\[WorkspaceTooSmall\] device workspace has 256 bytes"):
        native.plan(CONFIG, ws, i32(0, 1, 2, 3), i32(0, 3, 300, 301), kv_last_len=i32(5, 16, 1),
                    device_workspace=FAKE_DEVICE, device_bytes=256)


def test_sized_calls_check_the_plan_and_the_workspace_address(native):
    ws, addr, s, device = _plan(native)
    with pytest.raises(native.Error, match=r"InvalidArgument.*null"):
        native.upload_plan(addr, s["plan_bytes"], 0, 0, device_bytes=device)
    with pytest.raises(native.Error, match=r"InvalidArgument.*aligned"):
        native.upload_plan(addr, s["plan_bytes"], FAKE_DEVICE + 4, 0, device_bytes=device)
    ws[0:4] = b"\xff\xff\xff\xff"  # a corrupt plan header: refused before the size is looked at
    with pytest.raises(native.Error, match=r"InvalidArgument"):
        native.upload_plan(addr, s["plan_bytes"], FAKE_DEVICE, 0, device_bytes=256)


@pytest.mark.gpu
def test_run_and_merge_refuse_a_too_small_device_workspace():
    """A planned decode, then run and merge handed a workspace size below the
    plan's: a clear error naming the size, and nothing launched."""
    import torch
    ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    batch, page, pages = 3, 16, 40
    indptr = torch.tensor([0, 1, 39, 40], dtype=torch.int32)
    w.plan(indptr, torch.arange(pages, dtype=torch.int32, device="cuda"), torch.tensor([5, 16, 1], dtype=torch.int32),
           32, 8, 128, page, data_type=torch.bfloat16, q_data_type=torch.bfloat16)
    p, native = w._planned, _native.native()
    stream = torch.cuda.current_stream().cuda_stream
    with pytest.raises(native.Error, match=r"\[WorkspaceTooSmall\] device workspace has 256 bytes"):
        native.run(p.module, p.attention_kernel, p.merge_kernel, w._host_ws.data_ptr(), p.host_bytes,
                   ws.data_ptr(), [], stream, device_bytes=256)
    if p.merge_kernel:
        with pytest.raises(native.Error, match=r"\[WorkspaceTooSmall\] device workspace has 256 bytes"):
            native.merge(p.module, p.merge_kernel, w._host_ws.data_ptr(), p.host_bytes, ws.data_ptr(), [],
                         stream, device_bytes=256)
    torch.cuda.synchronize()
