"""GPU: the generated row kernels (attn.merge_states, attn.append_kv) through
attn.merge_state / merge_state_in_place / merge_states and
append_paged_kv_cache, against PyTorch on the same device; the copy_indices
kernel graph-mode plan() launches, directly. Skipped without torch/GPU."""

import pytest

import attn

pytestmark = pytest.mark.gpu


def reference_merge(vs, ss):
    """float32 merge of states vs[i] [seq, H, D] with base-2 LSEs ss[i]."""
    import torch
    s = torch.stack(ss, 0)
    m = s.max(0).values
    m = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    w = torch.exp2(s - m)
    total = w.sum(0)
    v = (torch.stack([x.float() for x in vs], 0) * w[..., None]).sum(0)
    v = v / torch.where(total > 0, total, torch.ones_like(total))[..., None]
    lse = torch.where(total > 0, torch.log2(total) + m, torch.full_like(total, float("-inf")))
    return v, lse


def states(n, seq, heads, d, dtype, seed, empty_rows=()):
    import torch
    gen = torch.Generator().manual_seed(seed)
    vs = [torch.randn(seq, heads, d, generator=gen).to(dtype).cuda() for _ in range(n)]
    ss = [(torch.randn(seq, heads, generator=gen) * 4).cuda() for _ in range(n)]
    for r in empty_rows:  # rows where some or all states saw no key
        for i in range(n if r % 2 == 0 else 1):
            ss[i][r] = float("-inf")
    return vs, ss


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("d,heads,seq", [(128, 32, 777), (64, 4, 33), (256, 8, 100), (96, 3, 5)])
def test_merge_state(dtype, d, heads, seq):
    import torch
    vs, ss = states(2, seq, heads, d, getattr(torch, dtype), seq + d, empty_rows=(0, 1, seq - 1))
    v, s = attn.merge_state(vs[0], ss[0], vs[1], ss[1])
    rv, rs = reference_merge(vs, ss)
    assert v.dtype == vs[0].dtype and s.dtype == torch.float32
    torch.testing.assert_close(v.float(), rv, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(s, rs, atol=1e-5, rtol=1e-5)
    assert torch.isneginf(s[0]).all() and (v[0] == 0).all()   # every state empty: 0 and -inf
    assert not torch.isnan(v.float()).any()


@pytest.mark.parametrize("n", [1, 3, 5, 9])
def test_merge_states(n):
    """n stacked states [seq, n, H, D]: one kernel of n states (groups of 4 loads)."""
    import torch
    vs, ss = states(n, 257, 8, 128, torch.bfloat16, n, empty_rows=(4,))
    v, s = attn.merge_states(torch.stack(vs, 1), torch.stack(ss, 1))
    rv, rs = reference_merge(vs, ss)
    torch.testing.assert_close(v.float(), rv, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(s, rs, atol=1e-5, rtol=1e-5)


def test_merge_states_f32():
    import torch
    vs, ss = states(3, 64, 4, 64, torch.float32, 3)
    v, s = attn.merge_states(torch.stack(vs, 1), torch.stack(ss, 1))
    rv, rs = reference_merge(vs, ss)
    torch.testing.assert_close(v, rv, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s, rs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask_dtype", [None, "bool", "uint8", "int32"])
def test_merge_state_in_place(mask_dtype):
    import torch
    vs, ss = states(2, 300, 8, 128, torch.float16, 7)
    va, sa = vs[0].clone(), ss[0].clone()
    mask = None
    rv, rs = reference_merge(vs, ss)
    if mask_dtype:
        gen = torch.Generator().manual_seed(5)
        keep = torch.rand(300, generator=gen) < 0.5
        mask = keep.to(getattr(torch, mask_dtype)).cuda()
        k = keep.cuda()
        rv = torch.where(k[:, None, None], rv, vs[0].float())
        rs = torch.where(k[:, None], rs, ss[0])
    attn.merge_state_in_place(va, sa, vs[1], ss[1], mask=mask)
    torch.testing.assert_close(va.float(), rv, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(sa, rs, atol=1e-5, rtol=1e-5)
    if mask_dtype:
        off = ~keep.cuda()
        assert torch.equal(va[off], vs[0][off]) and torch.equal(sa[off], ss[0][off])   # untouched bits


def test_merge_of_views_is_the_merge_of_copies():
    """A state whose rows are not dense (a view of a wider tensor) is copied first."""
    import torch
    vs, ss = states(2, 64, 8, 128, torch.bfloat16, 11)
    wide = torch.zeros(64, 8, 136, dtype=torch.bfloat16, device="cuda")
    wide[..., :128] = vs[1]
    v, s = attn.cascade.merge_state(vs[0], ss[0], vs[1].contiguous(), ss[1])
    from attn.rows import merge_into
    out = torch.empty_like(vs[0])
    lse = torch.empty_like(ss[0])
    merge_into([vs[0], wide[..., :128]], [ss[0], ss[1]], out, lse)
    assert torch.equal(out, v) and torch.equal(lse, s)


def page_table(lens, page, extra_pages, seed):
    import torch
    gen = torch.Generator().manual_seed(seed)
    npages = [(n + page - 1) // page for n in lens]
    indptr = torch.tensor([0] + torch.tensor(npages).cumsum(0).tolist(), dtype=torch.int32)
    indices = torch.randperm(sum(npages) + extra_pages, generator=gen)[:sum(npages)].int()
    return indptr, indices, sum(npages) + extra_pages


def reference_append(cache, key, batch, pos, indptr, indices, page, layout):
    """cache[page, slot] = key (NHD) / cache[page, :, slot] = key (HND), in PyTorch."""
    p = indices.long()[indptr.long()[batch.long()] + pos.long() // page]
    slot = pos.long() % page
    if layout == "NHD":
        cache[p, slot] = key
    else:
        cache[p, :, slot] = key


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("page,d,dtype", [(16, 128, "bfloat16"), (1, 64, "float16"), (3, 96, "bfloat16"),
                                          (48, 256, "float16")])
@pytest.mark.parametrize("combined", [False, True])
def test_append_paged_kv_cache(layout, page, d, dtype, combined):
    import torch
    dt = getattr(torch, dtype)
    heads, lens = 4, [37, 5, 64, 1]
    indptr, indices, pages = page_table(lens, page, 3, page + d)
    gen = torch.Generator().manual_seed(d)
    nnz = sum(lens)
    key = torch.randn(nnz, heads, d, generator=gen).to(dt).cuda()
    value = torch.randn(nnz, heads, d, generator=gen).to(dt).cuda()
    batch = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(lens)])
    pos = torch.cat([torch.arange(n, dtype=torch.int32) for n in lens])
    shape = (pages, page, heads, d) if layout == "NHD" else (pages, heads, page, d)
    if combined:
        cache = torch.randn(pages, 2, *shape[1:], generator=gen).to(dt).cuda()
        k_cache, v_cache = cache[:, 0], cache[:, 1]
        arg = cache
    else:
        k_cache = torch.randn(shape, generator=gen).to(dt).cuda()
        v_cache = torch.randn(shape, generator=gen).to(dt).cuda()
        arg = (k_cache, v_cache)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    reference_append(want_k, key, batch.cuda(), pos.cuda(), indptr.cuda(), indices.cuda(), page, layout)
    reference_append(want_v, value, batch.cuda(), pos.cuda(), indptr.cuda(), indices.cuda(), page, layout)
    last = torch.tensor([n - ((n + page - 1) // page - 1) * page for n in lens], dtype=torch.int32)
    attn.append_paged_kv_cache(key, value, batch.cuda(), pos.cuda(), arg, indices.cuda(), indptr.cuda(),
                               last.cuda(), kv_layout=layout)
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
    assert attn.page.dropped_append_rows() == 0


def test_append_out_of_range_writes_nothing_and_is_counted():
    """Positions past a request's pages, a request outside the batch, a page
    index outside the cache: those rows are dropped (counted per head), every
    other row lands, and the device stays usable (no device-side assert)."""
    import torch
    page, heads, d, lens = 16, 2, 128, [20, 10]
    indptr, indices, pages = page_table(lens, page, 0, 1)
    indices[-1] = pages + 7   # request 1's only page is outside the cache
    nnz = 6
    key = torch.randn(nnz, heads, d).to(torch.bfloat16).cuda()
    batch = torch.tensor([0, 0, 0, 5, -1, 1], dtype=torch.int32).cuda()
    pos = torch.tensor([3, 40, -2, 0, 0, 1], dtype=torch.int32).cuda()
    k_cache = torch.zeros(pages, page, heads, d, dtype=torch.bfloat16, device="cuda")
    v_cache = torch.zeros_like(k_cache)
    attn.page.dropped_append_rows()   # reset
    attn.append_paged_kv_cache(key, key, batch, pos, (k_cache, v_cache), indices.cuda(), indptr.cuda(),
                               torch.tensor([4, 10], dtype=torch.int32).cuda())
    assert attn.page.dropped_append_rows() == 5 * heads
    want = torch.zeros_like(k_cache)
    want[indices[0].long(), 3] = key[0]
    assert torch.equal(k_cache, want) and torch.equal(v_cache, want)
    assert torch.ones(4, device="cuda").sum().item() == 4   # the context still works


def test_row_kernels_in_a_cuda_graph():
    """Append and merge captured in a CUDA graph and replayed on new data."""
    import torch
    heads, d, page, lens = 8, 128, 16, [30, 3]
    indptr, indices, pages = page_table(lens, page, 2, 3)
    nnz = sum(lens)
    key = torch.zeros(nnz, heads, d, dtype=torch.bfloat16, device="cuda")
    batch = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(lens)]).cuda()
    pos = torch.cat([torch.arange(n, dtype=torch.int32) for n in lens]).cuda()
    k_cache = torch.zeros(pages, page, heads, d, dtype=torch.bfloat16, device="cuda")
    v_cache = torch.zeros_like(k_cache)
    va, sa = states(2, 64, heads, d, torch.bfloat16, 9)
    out = torch.empty_like(va[0])
    ind, ptr = indices.cuda(), indptr.cuda()
    last = torch.ones(2, dtype=torch.int32, device="cuda")

    def step():
        attn.append_paged_kv_cache(key, key, batch, pos, (k_cache, v_cache), ind, ptr, last)
        v, _ = attn.merge_state(va[0], sa[0], va[1], sa[1])
        out.copy_(v)

    step()   # compiles / loads the kernels outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    key.copy_(torch.randn(nnz, heads, d).to(torch.bfloat16))
    for x in va:
        x.copy_(torch.randn_like(x, dtype=torch.float32).to(x.dtype))
    g.replay()
    torch.cuda.synchronize()
    want = torch.zeros_like(k_cache)
    reference_append(want, key, batch, pos, ptr, ind, page, "NHD")
    assert torch.equal(k_cache, want)
    torch.testing.assert_close(out.float(), reference_merge(va, sa)[0], atol=1e-2, rtol=1e-2)


def test_append_of_strided_keys():
    """K and V as views of one [nnz, 2, H, D] tensor (a fused projection's
    output): read in place, token stride 2 H D."""
    import torch
    page, heads, d, lens = 16, 4, 128, [45, 8]
    indptr, indices, pages = page_table(lens, page, 1, 2)
    kv = torch.randn(sum(lens), 2, heads, d).half().cuda()
    batch = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(lens)]).cuda()
    pos = torch.cat([torch.arange(n, dtype=torch.int32) for n in lens]).cuda()
    cache = torch.zeros(pages, 2, page, heads, d, dtype=torch.half, device="cuda")
    attn.append_paged_kv_cache(kv[:, 0], kv[:, 1], batch, pos, cache, indices.cuda(), indptr.cuda(),
                               torch.tensor([13, 8], dtype=torch.int32).cuda())
    want = torch.zeros_like(cache)
    reference_append(want[:, 0], kv[:, 0], batch, pos, indptr.cuda(), indices.cuda(), page, "NHD")
    reference_append(want[:, 1], kv[:, 1], batch, pos, indptr.cuda(), indices.cuda(), page, "NHD")
    assert torch.equal(cache, want)


@pytest.mark.parametrize("counts", [(17, 17, 16, 512, 3, 0, 9, 1), (1, 0, 0, 0, 0, 0, 0, 0),
                                    (0, 3, 0, 70000, 0, 0, 0, 2), (0,) * 8, (300, 1, 2049, 5, 64, 65, 0, 7)])
def test_copy_indices(counts):
    """The copy_indices kernel plan() launches (eight arrays): each pair's first n words
    copied, the rest of every destination kept; a pair of count 0 may have
    null pointers; a launch over more rows than the counts copies nothing
    more."""
    import torch
    from attn.rows import PLAN_COPIES, launch_rows
    gen = torch.Generator().manual_seed(sum(counts))
    srcs = [torch.randint(-2**31, 2**31 - 1, (n + 5,), generator=gen, dtype=torch.int32).cuda() for n in counts]
    dsts = [torch.full((n + 7,), -7, dtype=torch.int32, device="cuda") for n in counts]
    for rows in (sum(counts), sum(counts) + 1000):
        for d in dsts:
            d.fill_(-7)
        args = []
        for i, (n, src, dst) in enumerate(zip(counts, srcs, dsts)):
            args += [(f"n{i}", "i32", n), (f"src{i}", "ptr", src.data_ptr() if n else 0),
                     (f"dst{i}", "ptr", dst.data_ptr() if n else 0)]
        launch_rows(PLAN_COPIES, torch.device("cuda", torch.cuda.current_device()), rows, args)
        torch.cuda.synchronize()
        for n, src, dst in zip(counts, srcs, dsts):
            assert torch.equal(dst[:n], src[:n])
            assert (dst[n:] == -7).all()


@pytest.mark.parametrize("staged", [False, True], ids=["host-table", "staged-table"])
@pytest.mark.parametrize("counts", [(17, 17, 16, 512, 3, 0, 9, 1, 4, 2), (1,) + (0,) * 9,
                                    (0, 3, 0, 70000, 0, 0, 0, 2, 0, -5), (0,) * 10])
def test_copy_by_table(counts, staged):
    """The copy_by_table kernel graph mode's run() launches (ten rows): each
    row's first n words copied from its source (pinned host memory for the
    even rows, device memory for the odd ones, as a plan's copies are) to its
    destination, the rest kept; a row of count 0 or less may have null
    pointers; a capacity below the counts' sum stops the copy there (words in
    row order); a table rewritten between launches copies its new rows. The
    kernel reads the table in host memory, or (staged) from a device buffer
    the launch first copies it to."""
    import torch
    from attn import _native
    from attn.core import COPY_TABLE_CAPACITY
    from attn.rows import PLAN_TABLE_COPIES, row_kernel
    assert PLAN_TABLE_COPIES.rows == len(counts)
    module, kernel = row_kernel(PLAN_TABLE_COPIES, torch.device("cuda", torch.cuda.current_device()))
    gen = torch.Generator().manual_seed(sum(counts) + 1)
    srcs = [torch.randint(-2**31, 2**31 - 1, (max(n, 0) + 5,), generator=gen, dtype=torch.int32)
            for n in counts]
    srcs = [s.pin_memory() if i % 2 == 0 else s.cuda() for i, s in enumerate(srcs)]
    dsts = [torch.full((max(n, 0) + 7,), -7, dtype=torch.int32, device="cuda") for n in counts]
    table = torch.zeros(3 * len(counts), dtype=torch.int64, pin_memory=True)
    for i, (n, src, dst) in enumerate(zip(counts, srcs, dsts)):
        table[3 * i:3 * i + 3] = torch.tensor([n, src.data_ptr() if n > 0 else 0, dst.data_ptr() if n > 0 else 0])
    stream = torch.cuda.current_stream().cuda_stream
    staged_table = torch.full_like(table, -1, device="cuda")  # kept alive for the launches
    staging = staged_table.data_ptr() if staged else 0
    total = sum(max(n, 0) for n in counts)
    for capacity in (COPY_TABLE_CAPACITY, total, total // 2):
        for d in dsts:
            d.fill_(-7)
        _native.native().copy_by_table(module, kernel, table.data_ptr(), capacity, None, stream, staging)
        torch.cuda.synchronize()
        left = capacity
        for n, src, dst in zip(counts, srcs, dsts):
            m = min(max(n, 0), left)
            left -= m
            assert torch.equal(dst[:m].cpu(), src[:m].cpu())
            assert (dst[m:] == -7).all()
    # The table read when the kernel runs: a new count, the same launch.
    if counts[0] > 1:
        table[0] = 1
        dsts[0].fill_(-7)
        _native.native().copy_by_table(module, kernel, table.data_ptr(), COPY_TABLE_CAPACITY, None, stream,
                                       staging)
        torch.cuda.synchronize()
        assert torch.equal(dsts[0][:1].cpu(), srcs[0][:1].cpu())
        assert (dsts[0][1:] == -7).all()


def test_copy_by_table_refuses_another_kernel():
    import torch
    from attn import _native
    from attn.rows import PLAN_COPIES, row_kernel
    module, kernel = row_kernel(PLAN_COPIES, torch.device("cuda", torch.cuda.current_device()))
    table = torch.zeros(30, dtype=torch.int64, pin_memory=True)
    with pytest.raises(Exception, match="no copy_by_table kernel"):
        _native.native().copy_by_table(module, kernel, table.data_ptr(), 100, None, 0)
