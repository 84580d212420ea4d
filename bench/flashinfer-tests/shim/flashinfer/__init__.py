"""`import flashinfer` that is attn: the shim of the FlashInfer conformance rig.

Not FlashInfer: attn's conformance rig (bench/flashinfer-tests/README.md).
Importing this package replaces ``sys.modules["flashinfer"]`` and registers
its submodules so that FlashInfer's own test files run on attn unchanged:

* ``flashinfer`` and ``flashinfer.{decode,prefill,cascade,page,utils,mla}``
  are views of ``attn`` and ``attn.{decode,...}``: every name attn has is
  attn's own object (``flashinfer.BatchDecodeWithPagedKVCacheWrapper is
  attn.BatchDecodeWithPagedKVCacheWrapper``); a name attn lacks is an
  AttributeError saying ``fi-shim: attn has no flashinfer.NAME`` (never a
  stand-in implementation).
* JIT-infrastructure stubs, and nothing else: FlashInfer's tests warm up
  its nvcc JIT (``flashinfer.jit.build_jit_specs`` over
  ``gen_*_module(...)`` specs, the tests/attention/conftest.py prebuild, the
  ``has_flashinfer_jit_cache()`` switch of the ``warmup_jit`` fixtures).
  These compile FlashInfer's kernels, not attention calls; attn's kernels
  come from its kernel cache, so here they are no-ops returning inert
  specs, and ``has_flashinfer_jit_cache()`` is True (no warm-up needed).
  The few FlashInfer-backend predicates the JIT helpers read
  (``is_fa3_backend_supported``...) answer for attn, which has no FA3.
* Names attn lacks that the tests' helper modules import at module level
  (NVFP4 quantization utilities): placeholders that raise
  ``NotImplementedError("fi-shim: attn has no ...")`` when used, so that
  the files import and each NVFP4 case fails with that clear refusal.

Put the folder holding this package on PYTHONPATH (run.sh does) so that the
tests' subprocesses (``sys.executable -c "from flashinfer import ..."``)
see it too.
"""

import pathlib
import sys
import tempfile
import types

import attn
import attn.cascade
import attn.decode
import attn.mla
import attn.page
import attn.prefill
import attn.utils

SHIM = "fi-shim"


class _View(types.ModuleType):
    """A module that shows ``target``'s names (the same objects) plus its own."""

    def __init__(self, name, target=None, package=False, **own):
        super().__init__(name)
        self.__dict__["_target"] = target
        if package:
            self.__path__ = []
        self.__dict__.update(own)

    def __getattr__(self, attr):
        target = self.__dict__.get("_target")
        if target is not None and not attr.startswith("__"):
            try:
                return getattr(target, attr)
            except AttributeError:
                pass
        raise AttributeError(f"{SHIM}: attn has no {self.__name__}.{attr}")

    def __dir__(self):
        target = self.__dict__.get("_target")
        return sorted(set(self.__dict__) | (set(dir(target)) if target is not None else set()))


def _absent(name):
    """A name attn lacks, needed at import time by a test helper: using it refuses."""
    def absent(*args, **kwargs):
        raise NotImplementedError(f"{SHIM}: attn has no {name}")
    absent.__name__ = absent.__qualname__ = name.rsplit(".", 1)[-1]
    return absent


class _AbsentClassMeta(type):
    def __getattr__(cls, attr):
        raise NotImplementedError(f"{SHIM}: attn has no {cls.__qualname__}.{attr}")


def _absent_class(name):
    def init(self, *args, **kwargs):
        raise NotImplementedError(f"{SHIM}: attn has no {name}")
    return _AbsentClassMeta(name.rsplit(".", 1)[-1], (), {"__init__": init, "__qualname__": name})


# -- JIT infrastructure stubs (FlashInfer's nvcc JIT warm-up; not attention calls) --------------

_JIT_DIR = pathlib.Path(tempfile.gettempdir()) / "fi-shim-no-jit"


class JitSpec:
    """An inert stand-in for FlashInfer's JIT module spec (nothing is compiled)."""

    def __init__(self, name="fi-shim-noop", *args, **kwargs):
        self.name = name
        self.jit_library_path = _JIT_DIR / name / "absent.so"
        self.aot_path = _JIT_DIR / "aot" / name / "absent.so"

    def build_and_load(self, *args, **kwargs):
        raise NotImplementedError(f"{SHIM}: attn has no FlashInfer JIT modules ({self.name})")


def build_jit_specs(specs, verbose=False, skip_prebuilt=True):
    """No-op: FlashInfer's JIT warm-up; attn loads its kernels from its kernel cache."""
    return None


def _gen(name):
    def gen(*args, **kwargs):
        return JitSpec(f"{name}-noop")
    gen.__name__ = gen.__qualname__ = name
    gen.__doc__ = "FlashInfer JIT spec generator: an inert JitSpec (test infrastructure, nothing compiled)."
    return gen


def has_flashinfer_jit_cache():
    """True: no FlashInfer JIT warm-up is needed (the tests' warmup_jit fixtures stay off)."""
    return True


def _is_sm90a_supported(device=None):
    import torch
    try:
        return torch.cuda.get_device_capability(device) == (9, 0)
    except Exception:  # no CUDA: the JIT helpers that ask then build nothing
        return False


def _is_sm12x_supported(device=None):
    import torch
    try:
        return torch.cuda.get_device_capability(device)[0] == 12
    except Exception:
        return False


def _no_fa3(*args, **kwargs):
    """attn has no FA3 backend: FlashInfer's JIT helpers then list no FA3 modules."""
    return False


class GPUArchitectureError(Exception):
    """FlashInfer's exception type the test helpers catch (attn never raises it)."""


# -- the module tree -----------------------------------------------------------------------------

_jit_env = _View("flashinfer.jit.env", FLASHINFER_JIT_DIR=_JIT_DIR)
_jit_core = _View("flashinfer.jit.core", build_jit_specs=build_jit_specs, JitSpec=JitSpec)
_jit_utils = _View("flashinfer.jit.utils", filename_safe_dtype_map={})
_jit_xqa = _View("flashinfer.jit.xqa", gen_xqa_module=_gen("gen_xqa_module"))
_jit_attention_variants = _View("flashinfer.jit.attention.variants", attention_sink_decl={})
_jit_attention = _View("flashinfer.jit.attention", package=True, variants=_jit_attention_variants)
_jit = _View("flashinfer.jit", package=True, JitSpec=JitSpec, build_jit_specs=build_jit_specs,
             gen_customize_batch_prefill_module=_gen("gen_customize_batch_prefill_module"),
             gen_fmha_v2_module=_gen("gen_fmha_v2_module"),
             gen_trtllm_fmha_v2_sm120_module=_gen("gen_trtllm_fmha_v2_sm120_module"),
             env=_jit_env, core=_jit_core, utils=_jit_utils, xqa=_jit_xqa, attention=_jit_attention)

_decode = _View("flashinfer.decode", attn.decode,
                gen_single_decode_module=_gen("gen_single_decode_module"),
                gen_batch_decode_module=_gen("gen_batch_decode_module"))
_prefill = _View("flashinfer.prefill", attn.prefill,
                 gen_single_prefill_module=_gen("gen_single_prefill_module"),
                 gen_batch_prefill_module=_gen("gen_batch_prefill_module"))
_page = _View("flashinfer.page", attn.page, gen_page_module=_gen("gen_page_module"))
_utils = _View("flashinfer.utils", attn.utils, has_flashinfer_jit_cache=has_flashinfer_jit_cache,
               is_sm90a_supported=_is_sm90a_supported, is_sm12x_supported=_is_sm12x_supported,
               is_fa3_backend_supported=_no_fa3, is_fa3_prefill_head_dim_supported=_no_fa3,
               GPUArchitectureError=GPUArchitectureError)
_cascade = _View("flashinfer.cascade", attn.cascade)
_mla = _View("flashinfer.mla", attn.mla)
# flashinfer.attention (BatchAttention): attn has none; only its JIT generator is named (jit_utils).
_attention = _View("flashinfer.attention", gen_batch_attention_module=_gen("gen_batch_attention_module"))

# NVFP4: attn has none. The helper tests/test_helpers/utils_fp4.py imports these at module level.
_nvfp4_utils = _View("flashinfer.quantization.nvfp4_quantization_utils",
                     NVFP44Over6Config=_absent_class("flashinfer.quantization.NVFP44Over6Config"),
                     NVFP44Over6ErrMode=_absent_class("flashinfer.quantization.NVFP44Over6ErrMode"),
                     nvfp4_e4m3_max=_absent("flashinfer.quantization.nvfp4_e4m3_max"))
_quantization = _View("flashinfer.quantization", package=True, nvfp4_quantization_utils=_nvfp4_utils,
                      gen_quantization_module=_gen("gen_quantization_module"))
_fp4 = _View("flashinfer.fp4_quantization",
             e2m1_and_ufp8sf_scale_to_float=_absent("flashinfer.fp4_quantization.e2m1_and_ufp8sf_scale_to_float"))

_top = _View("flashinfer", attn, package=True, jit=_jit, decode=_decode, prefill=_prefill, page=_page,
             utils=_utils, cascade=_cascade, mla=_mla, attention=_attention, quantization=_quantization,
             fp4_quantization=_fp4, __file__=__file__, __version__=f"attn-{attn.__version__}")

for _m in (_top, _jit, _jit_env, _jit_core, _jit_utils, _jit_xqa, _jit_attention, _jit_attention_variants,
           _decode, _prefill, _page, _utils, _cascade, _mla, _attention, _quantization, _nvfp4_utils, _fp4):
    sys.modules[_m.__name__] = _m
