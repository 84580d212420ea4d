"""FlashInfer's test files on attn: the shim, and the case selection.

Loaded before tests/conftest.py (FlashInfer's own) and the test files:
puts shim/ (the ``flashinfer`` package that is attn) and this folder (for
``tests.test_helpers``) first on sys.path, then imports the shim.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "shim"), HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import flashinfer  # noqa: E402,F401  (the shim: sys.modules["flashinfer"] is now attn's view)


# -- the selection ---------------------------------------------------------------------------------
#
# FlashInfer's grids are products of every parameter (36203 cases in these 11
# files). Most parameters pick a kernel or an API path (dtype, head dim, heads,
# page size, layout, variant, causal, CUDA graph, ...): the "configuration";
# the rest are sizes and values the same kernel serves (SHAPE below). The
# selection keeps, per test function, FI_CASES_PER_CONFIG cases (default 1) of
# each distinct configuration, chosen greedily to cover the most shape values
# not yet covered (ties: the smallest case), then adds the smallest case of any
# (parameter, value) still uncovered, so every value of every parameter of
# every function runs at least once. Deterministic (collection order).
# FI_SELECT=all runs every case; FI_SELECTION_OUT=FILE writes the kept node ids.

import collections  # noqa: E402

SHAPE = {
    "batch_size", "kv_len", "qo_len", "q_len", "seq_len", "shared_kv_len", "unique_kv_len",
    "prefix_len_ptr", "max_item_len_ptr", "token_pos_in_items_len", "token_pos_in_items_ptr",
    "num_tries", "seed", "invariant_bs", "target_logit", "bad_scale", "k_scale", "fixed_split_size",
    "window_left",  # a kernel argument: one kernel serves every window
    "soft_cap",     # likewise (test_logits_cap's values are all > 0)
}


def _val(v):
    return repr(v)


def _size(params):
    n = 1
    for k in SHAPE & set(params):
        v = params[k]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v > 1:
            n *= v
        elif isinstance(v, (list, tuple)):
            n *= max(1, len(v))
    return n


def select(items, per_config=1):
    """The kept items (in collection order) and the dropped ones."""
    by_fn = collections.defaultdict(list)
    for it in items:
        by_fn[it.nodeid.split("[")[0]].append(it)
    keep = set()
    for fn, its in by_fn.items():
        params = [getattr(it, "callspec", None) and it.callspec.params or {} for it in its]
        groups = collections.defaultdict(list)
        for i, p in enumerate(params):
            groups[tuple(sorted((k, _val(v)) for k, v in p.items() if k not in SHAPE))].append(i)
        covered = set()
        for idx in groups.values():
            chosen = []
            for _ in range(min(per_config, len(idx))):
                best = max((i for i in idx if i not in chosen),
                           key=lambda i: (len({(k, _val(v)) for k, v in params[i].items()} - covered),
                                          -_size(params[i]), -i))
                chosen.append(best)
                covered |= {(k, _val(v)) for k, v in params[best].items()}
            keep.update(id(its[i]) for i in chosen)
        for i in sorted(range(len(its)), key=lambda i: (_size(params[i]), i)):
            new = {(k, _val(v)) for k, v in params[i].items()} - covered
            if new:
                keep.add(id(its[i]))
                covered |= new
    kept = [it for it in items if id(it) in keep]
    return kept, [it for it in items if id(it) not in keep]


def pytest_collection_modifyitems(config, items):
    mode = os.environ.get("FI_SELECT", "config")
    if mode == "all":
        return
    if mode != "config":
        raise pytest.UsageError(f"FI_SELECT must be 'config' or 'all', got {mode!r}")
    kept, dropped = select(items, int(os.environ.get("FI_CASES_PER_CONFIG", "1")))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    path = os.environ.get("FI_SELECTION_OUT")
    if path:
        with open(path, "w") as f:
            f.writelines(it.nodeid + "\n" for it in kept)


import pytest  # noqa: E402
