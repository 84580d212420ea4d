"""Attention variants and the attn IR the package compiles.

A variant is a set of hook regions (``attn.variant``, docs of the attn
dialect); the built-in ones live in the compiler's library and are selected
by the FlashInfer keywords the wrappers take (``causal``, ``window_left``,
``logits_soft_cap``, ``pos_encoding_mode``, ``sinks``). A custom variant is
MLIR text, checked by the compiler's own verifier::

    >>> import attn
    >>> v = attn.Variant('''
    ... attn.variant @tanh_cap(cap : f32) {
    ...   attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    ...     %c = attn.param "cap" : f32
    ...     %x = arith.divf %s, %c : f32
    ...     %t = math.tanh %x : f32
    ...     %r = arith.mulf %c, %t : f32
    ...     attn.yield %r : f32
    ...   }
    ... }''')
    >>> v.names, v.params["tanh_cap"]
    (['tanh_cap'], [('cap', 'f32')])

Everything here is plain Python (no torch, no compiler): the IR text it
writes is also the kernel-cache key, so a machine without the compiler finds
the kernels precompiled elsewhere.
"""

import dataclasses
import re

# Parameters of the built-in variants (lib/Dialect/Attn/IR/BuiltinVariants.mlir),
# in declaration order: (name, MLIR type).
BUILTIN_VARIANTS = {
    "causal": [],
    "sliding_window": [("window_left", "i32")],
    "soft_cap": [("cap", "f32")],
    "logits_scale": [("scale", "f32")],
    "alibi": [],
    "rope": [("rope_scale", "f32"), ("rope_theta", "f32")],
    "rope_llama31": [("rope_scale", "f32"), ("rope_theta", "f32"), ("rope_factor", "f32"),
                     ("low_freq_factor", "f32"), ("high_freq_factor", "f32"),
                     ("original_context", "f32")],
    "sinks": [("sinks", "memref<?xf32>")],
}

# FlashInfer's pos_encoding_mode values, plus attn's Llama-3.1 RoPE.
POS_ENCODING_MODES = ("NONE", "ROPE_LLAMA", "ROPE_LLAMA31", "ALIBI")

# What an AttentionSpec may hold (docs/Python.md). Head dims: multiples of the
# mma k-step up to the register budget (TargetInfo::checkHeadDim); pages: the
# dialect's largest block_cols; heads and fixed query rows: far inside the
# 32-bit row and offset arithmetic of the planner and the kernels.
HEAD_DIM_GRANULE, MAX_HEAD_DIM = 16, 256
MAX_PAGE_SIZE = 1 << 16
MAX_HEADS = 1 << 16
MAX_QUERY_ROWS = 1 << 16
DTYPES = ("bf16", "f16")
LAYOUTS = ("NHD", "HND")
INDEXINGS = ("paged", "ragged")
# The parameter types the wrappers bind: scalars, and a float32 table by pointer.
PARAM_TYPES = ("i32", "f32", "memref<?xf32>")

_VARIANT_RE = re.compile(r"attn\.variant\s+@([A-Za-z_][\w$.]*)\s*(?:\(([^)]*)\))?")
_PARAM_RE = re.compile(r"\s*([A-Za-z_]\w*)\s*:\s*(.+?)\s*$")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_type_int(field, v):
    # bool is an int subclass: True would be written into the IR as "True".
    if type(v) is not int:
        raise TypeError(f"attn: {field} must be an int, got {type(v).__name__} {v!r:.40}")


def _check_int(field, v, hi):
    _check_type_int(field, v)
    if not 1 <= v <= hi:
        raise ValueError(f"attn: {field} must be a positive int <= {hi}, got {v}")


def _check_choice(field, v, choices):
    if type(v) is not str:
        raise TypeError(f"attn: {field} must be a str, one of {choices}, got {type(v).__name__}")
    if v not in choices:
        raise ValueError(f"attn: {field} must be one of {choices}, got {v!r:.40}")


def _check_ident(field, v):
    if type(v) is not str:
        raise TypeError(f"attn: {field} must be a str, got {type(v).__name__}")
    if not _IDENT_RE.fullmatch(v):
        raise ValueError(f"attn: {field}: {v!r:.40} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")


def _as_tuple(field, v):
    if type(v) not in (tuple, list):
        raise TypeError(f"attn: {field} must be a tuple, got {type(v).__name__}")
    return tuple(v)


def _check_sizes(num_qo_heads, num_kv_heads, head_dim, page_size):
    _check_int("num_qo_heads", num_qo_heads, MAX_HEADS)
    _check_int("num_kv_heads", num_kv_heads, MAX_HEADS)
    _check_type_int("head_dim", head_dim)
    if not 0 < head_dim <= MAX_HEAD_DIM or head_dim % HEAD_DIM_GRANULE:
        raise ValueError(f"attn: head_dim must be a multiple of {HEAD_DIM_GRANULE} in "
                         f"[{HEAD_DIM_GRANULE}, {MAX_HEAD_DIM}], got {head_dim}")
    _check_int("page_size", page_size, MAX_PAGE_SIZE)
    if num_qo_heads % num_kv_heads:
        raise ValueError(f"attn: num_qo_heads ({num_qo_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")


def _split_params(text):
    """Splits 'a : f32, b : memref<?xf32>' at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    params = []
    for p in out:
        m = _PARAM_RE.match(p)
        if not m:
            raise ValueError(f"attn: cannot read variant parameter '{p.strip()}' (expected 'name : type')")
        params.append((m.group(1), m.group(2)))
    return params


class Variant:
    """A custom attention variant: one or more ``attn.variant`` definitions.

    ``text`` is MLIR (hook regions, see the attn dialect docs). The names and
    parameters are read here; :meth:`verify` runs the compiler's parser and
    verifiers and raises :class:`attn.CompileError` with its diagnostics
    (``attn.mlir:LINE:COL: error: ...``). Wrappers take it as ``variant=``
    and its parameter values as ``variant_params={"name": value}``.

    >>> v = Variant('attn.variant @no_op { }')
    >>> v.names
    ['no_op']
    """

    def __init__(self, text):
        if not isinstance(text, str):
            raise TypeError(f"attn: Variant expects MLIR text, got {type(text).__name__}")
        self.text = text.strip()
        self.params = {}
        self.names = []
        for m in _VARIANT_RE.finditer(self.text):
            name = m.group(1)
            _check_ident("variant name", name)
            if name in BUILTIN_VARIANTS:
                raise ValueError(f"attn: variant @{name} would shadow the built-in of that name; rename it")
            self.names.append(name)
            self.params[name] = _split_params(m.group(2) or "")
        if not self.names:
            raise ValueError("attn: no 'attn.variant @name' definition found in the variant text")

    def verify(self):
        """Parses and verifies the text with the compiler; returns self.

        Raises CompileError (with the compiler's diagnostics) when it is
        invalid, and RuntimeError when this build has no compiler.
        """
        from ._native import has_compiler, native
        from .errors import CompileError
        if not has_compiler():
            raise RuntimeError("attn: verifying a variant needs the compiler (this build is runtime-only)")
        r = native().verify_variant(self.text)
        if not r["ok"]:
            raise CompileError(r["status"], r["diagnostics"], what="variant")
        return self

    def __repr__(self):
        return f"Variant({', '.join('@' + n for n in self.names)})"


@dataclasses.dataclass(frozen=True)
class AttentionSpec:
    """Everything that selects a compiled kernel, and its attn IR.

    ``indexing`` is ``"paged"`` (``page_size`` tokens per page) or
    ``"ragged"``; ``query_rows`` is the query rows per request the kernels
    are built for: 1 for decode (one tile), None when it varies per batch
    (prefill, append, several tokens per request: the compiler emits every
    tile candidate and plan() picks one per batch, docs/Runtime.md); ``variants`` are names in
    application order, built-in or defined in ``variant_defs``;
    ``custom_mask`` adds a bit-packed mask operand (the kernels then take
    ``custom_mask`` and ``mask_indptr``); ``strided_kv`` (ragged only) builds
    kernels that read K/V rows at a token and a head stride given at launch
    (``kv_token_stride``, ``kv_head_stride``) instead of densely in
    ``layout``: a fused QKV projection's K and V slices, HND tensors.

    >>> s = AttentionSpec(head_dim=128, num_qo_heads=32, num_kv_heads=8, page_size=16)
    >>> "attn.attention" in s.to_ir() and s.param_list() == []
    True
    """

    head_dim: int
    num_qo_heads: int
    num_kv_heads: int
    page_size: int = 16
    dtype: str = "bf16"
    layout: str = "NHD"
    indexing: str = "paged"
    query_rows: object = 1  # an int, or None: varies per batch
    variants: tuple = ()
    variant_defs: str = ""
    custom_params: tuple = ()  # ((variant, ((name, type), ...)), ...)
    custom_mask: bool = False  # a bit-packed custom mask operand (tensor<?xi8>)
    strided_kv: bool = False  # ragged K/V rows at strides given at launch

    def __post_init__(self):
        """Checks every field before it reaches IR text (the cache key) or the
        compiler, so a bad value is a TypeError/ValueError naming the field,
        never a module with text injected into it. Sequences become tuples
        (the spec is hashed)."""
        _check_sizes(self.num_qo_heads, self.num_kv_heads, self.head_dim, self.page_size)
        _check_choice("dtype", self.dtype, DTYPES)
        _check_choice("layout", self.layout, LAYOUTS)
        _check_choice("indexing", self.indexing, INDEXINGS)
        if self.query_rows is not None:
            _check_int("query_rows", self.query_rows, MAX_QUERY_ROWS)
        if type(self.custom_mask) is not bool:
            raise TypeError(f"attn: custom_mask must be a bool, got {type(self.custom_mask).__name__}")
        if type(self.strided_kv) is not bool:
            raise TypeError(f"attn: strided_kv must be a bool, got {type(self.strided_kv).__name__}")
        if self.strided_kv and self.indexing != "ragged":
            raise ValueError("attn: strided_kv is for ragged K/V; a paged cache takes its page stride at launch")
        if type(self.variant_defs) is not str:
            raise TypeError(f"attn: variant_defs must be MLIR text (str), got {type(self.variant_defs).__name__}")
        custom = {}
        if self.custom_params != ():  # a list becomes a tuple, anything else is refused
            defined = {m.group(1) for m in _VARIANT_RE.finditer(self.variant_defs)}
            for entry in _as_tuple("custom_params", self.custom_params):
                if type(entry) not in (tuple, list) or len(entry) != 2:
                    raise TypeError("attn: custom_params entries must be (variant, ((name, type), ...)), "
                                    f"got {entry!r:.60}")
                name, params = entry[0], _as_tuple(f"custom_params of @{entry[0]}", entry[1])
                _check_ident("custom_params variant", name)
                if name in BUILTIN_VARIANTS:
                    raise ValueError(f"attn: custom_params: @{name} would shadow the built-in of that name")
                if name in custom:
                    raise ValueError(f"attn: custom_params: @{name} is given twice")
                if name not in defined:
                    raise ValueError(f"attn: custom_params: @{name} is not defined in variant_defs")
                for p in params:
                    if type(p) not in (tuple, list) or len(p) != 2:
                        raise TypeError(f"attn: custom_params of @{name}: expected (name, type) pairs, got {p!r:.60}")
                    _check_ident(f"custom_params of @{name}: parameter name", p[0])
                    if type(p[1]) is not str or p[1] not in PARAM_TYPES:
                        raise ValueError(f"attn: custom_params of @{name}: parameter '{p[0]}' has type {p[1]!r:.40}; "
                                         f"the wrappers bind {', '.join(PARAM_TYPES)}")
                names = [p[0] for p in params]
                if len(set(names)) != len(names):
                    raise ValueError(f"attn: custom_params of @{name}: parameter names repeat: {names}")
                custom[name] = tuple(tuple(p) for p in params)
            object.__setattr__(self, "custom_params", tuple(custom.items()))
        if type(self.variants) is not tuple:
            object.__setattr__(self, "variants", _as_tuple("variants", self.variants))
        for v in self.variants:
            if type(v) is not str or (v not in BUILTIN_VARIANTS and v not in custom):
                _check_ident("variants", v)
                raise ValueError(f"attn: variants: @{v} is neither built-in ({', '.join(BUILTIN_VARIANTS)}) "
                                 "nor defined in custom_params")

    def param_list(self):
        """[(variant, param, type)] in the order of attn.attention's params."""
        custom = dict(self.custom_params)
        out = []
        for v in self.variants:
            for name, ty in (BUILTIN_VARIANTS[v] if v in BUILTIN_VARIANTS else custom[v]):
                out.append((v, name, ty))
        return out

    def to_ir(self):
        """The attn IR module compiled for this spec (also the cache key)."""
        t, D, Hq, Hkv = self.dtype, self.head_dim, self.num_qo_heads, self.num_kv_heads
        rows = "?" if self.query_rows is None else self.query_rows
        q = f"tensor<?x{Hq}x{D}x{t}>"
        lse = f"tensor<?x{Hq}xf32>"
        idx = "tensor<?xi32>"
        if self.indexing == "paged":
            P = self.page_size
            kv = (f"tensor<?x{P}x{Hkv}x{D}x{t}>" if self.layout == "NHD"
                  else f"tensor<?x{Hkv}x{P}x{D}x{t}>")
            fmt = f"#attn.bsr<block_rows = {rows}, block_cols = {P}, layout = {self.layout}>"
            # block_cols = 1 (the column-vector form) has no last-page length:
            # every page is full. The kernels still take kv_last_len.
            names = ["%qo_indptr", "%kv_indptr", "%kv_indices"] + (["%kv_last_len"] if P > 1 else [])
        else:
            kv = (f"tensor<?x{Hkv}x{D}x{t}>" if self.layout == "NHD"
                  else f"tensor<{Hkv}x?x{D}x{t}>")
            fmt = (f"#attn.bsr<block_rows = {rows}, block_cols = 1, "
                   f"layout = {self.layout}, indexing = ragged"
                   + (", strided = true>" if self.strided_kv else ">"))
            names = ["%qo_indptr", "%kv_indptr"]
        params = self.param_list()
        args = [f"%q: {q}", f"%k: {kv}", f"%v: {kv}"] + [f"{n}: {idx}" for n in names]
        if self.custom_mask:
            args.append("%mask: tensor<?xi8>")
        args.append("%sm_scale: f32")
        args += [f"%p{i}: {ty}" for i, (_, _, ty) in enumerate(params)]
        body = (f"  %o, %lse = attn.attention %q, %k, %v format({fmt})\n"
                f"      indices({', '.join(names)} : {', '.join([idx] * len(names))})\n")
        if self.custom_mask:
            body += "      mask(%mask : tensor<?xi8>)\n"
        body += "      sm_scale(%sm_scale)"
        if self.variants:
            body += "\n      variants [" + ", ".join("@" + v for v in self.variants) + "]"
        if params:
            body += ("\n      params(" + ", ".join(f"%p{i}" for i in range(len(params))) + " : "
                     + ", ".join(ty for _, _, ty in params) + ")")
        body += f"\n      : {q}, {kv}, {kv} -> {q}, {lse}\n"
        text = (self.variant_defs.strip() + "\n\n") if self.variant_defs else ""
        text += (f"func.func @attention({', '.join(args)}) -> ({q}, {lse}) {{\n{body}"
                 f"  return %o, %lse : {q}, {lse}\n}}\n")
        return text


def build_variants(*, causal=False, window_left=-1, logits_soft_cap=None, pos_encoding_mode="NONE",
                   rope_scale=None, rope_theta=None, sinks=None, variant=None, variant_params=None,
                   llama31_rope=None, logits_scale=None):
    """Maps FlashInfer keywords to (variant names, param values by (variant, name)).

    Order: RoPE (query/key transform), logits scale (an extra factor after
    ``sm_scale``), ALiBi, soft-cap (on the scaled, biased logits), causal and
    sliding-window masks, sinks, then custom variants. ``sinks`` is a float32
    ``[num_qo_heads]`` tensor (scaled-logit units), passed to the kernel as a
    table; ``logits_scale`` (attn's keyword, not FlashInfer's) applies
    ``@logits_scale``.

    >>> build_variants(causal=True, window_left=128, logits_soft_cap=30.0)[0]
    ('soft_cap', 'causal', 'sliding_window')
    >>> build_variants(logits_scale=0.5, logits_soft_cap=30.0)
    (('logits_scale', 'soft_cap'), {('logits_scale', 'scale'): 0.5, ('soft_cap', 'cap'): 30.0})
    """
    if pos_encoding_mode not in POS_ENCODING_MODES:
        raise ValueError(f"attn: pos_encoding_mode must be one of {POS_ENCODING_MODES}, got {pos_encoding_mode!r}")
    if window_left is None:
        window_left = -1
    if not isinstance(window_left, int):
        raise TypeError(f"attn: window_left must be an int, got {type(window_left).__name__}")
    names, values = [], {}
    theta = 1e4 if rope_theta is None else float(rope_theta)
    scale = 1.0 if rope_scale is None else float(rope_scale)
    if pos_encoding_mode == "ROPE_LLAMA":
        names.append("rope")
        values[("rope", "rope_scale")] = scale
        values[("rope", "rope_theta")] = theta
    elif pos_encoding_mode == "ROPE_LLAMA31":
        cfg = {"rope_factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_context": 8192.0}
        cfg.update(llama31_rope or {})
        names.append("rope_llama31")
        values[("rope_llama31", "rope_scale")] = scale
        values[("rope_llama31", "rope_theta")] = 5e5 if rope_theta is None else theta
        for k, v in cfg.items():
            values[("rope_llama31", k)] = float(v)
    if logits_scale is not None:
        names.append("logits_scale")
        values[("logits_scale", "scale")] = float(logits_scale)
    if pos_encoding_mode == "ALIBI":
        names.append("alibi")
    if logits_soft_cap is not None and logits_soft_cap > 0:
        names.append("soft_cap")
        values[("soft_cap", "cap")] = float(logits_soft_cap)
    if causal:
        names.append("causal")
    if window_left >= 0:
        names.append("sliding_window")
        values[("sliding_window", "window_left")] = int(window_left)
    if sinks is not None:
        names.append("sinks")
        values[("sinks", "sinks")] = sinks
    if variant is not None:
        if not isinstance(variant, Variant):
            raise TypeError("attn: variant must be an attn.Variant (MLIR text wrapped in attn.Variant(...))")
        given = dict(variant_params or {})
        for name in variant.names:
            names.append(name)
            for p, _ in variant.params[name]:
                if p not in given:
                    raise ValueError(f"attn: variant @{name} needs parameter '{p}' in variant_params")
                values[(name, p)] = given.pop(p)
        if given:
            raise ValueError(f"attn: variant_params has unknown parameters {sorted(given)}")
    elif variant_params:
        raise ValueError("attn: variant_params given without a variant")
    return tuple(names), values
