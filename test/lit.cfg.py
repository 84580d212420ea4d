# -*- Python -*-
# lit configuration of the attn test suite. Hardware-dependent tests are
# gated by features detected here: `ptxas` when the CUDA assembler is found,
# `gpu` when nvidia-smi sees a device. Tests without their feature report
# themselves UNSUPPORTED, never passed.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "attn"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attn_obj_root, "test")
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.attn_tools_dir, append_path=True)

cuda_bin = os.path.join(config.cuda_root or "/usr/local/cuda", "bin")
ptxas = shutil.which("ptxas") or shutil.which("ptxas", path=cuda_bin)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    llvm_config.with_environment("PATH", os.path.dirname(ptxas), append_path=True)
    config.environment["CUDA_HOME"] = os.path.dirname(os.path.dirname(ptxas))

def has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
        return out.returncode == 0 and "GPU" in out.stdout
    except Exception:
        return False

if has_gpu():
    config.available_features.add("gpu")

config.substitutions.append(("%attn_src_root", config.attn_src_root))
