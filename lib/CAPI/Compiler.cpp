//===- Compiler.cpp - C API of the attn compiler ---------------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// attn IR text in, PTX / cubin + manifest out, with every diagnostic captured
// as text. The stages, each timed:
//
//   1. parse      the text in a fresh MLIRContext (attn + upstream dialects);
//                 diagnostics print as `attn.mlir:LINE:COL: error: ...`
//   2. verify     the dialect's verifiers (hook signatures, heads, formats)
//   3. prepare    buildAttnPreparePipeline: variant expansion, cascade
//                 decomposition, tile selection, GQA packing
//   4. codegen    compileAttentionKernels: attn-outline-kernels writes each
//                 tiled attention's kernels in the tile-level form with
//                 their launch contracts (the manifest), convert-attn-to-gpu
//                 lowers them for the chip, the variants' hooks inlined
//   5. target     compileGPUModules: NVVM, PTX, ptxas (lower-to-nvvm,
//                 llvm-to-ptx, ptxas)
//
// Nothing here throws across the C boundary or lets LLVM abort on user
// input: target options are validated first, and exceptions (none expected,
// LLVM is built without them) are caught defensively.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Compiler.h"
#include "attn/Version.h"

#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/InitAllDialects.h"
#include "attn/Target/AttentionKernels.h"
#include "attn/Target/Serialization.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>
#include <vector>

using namespace mlir;

struct attnCompilerResult {
  attnCompilerStatus status = ATTN_COMPILER_OK;
  std::string diagnostics, ir, ptx, manifest, generator;
  std::vector<char> cubin;
  std::vector<std::pair<std::string, double>> stages;
};

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

/// One compilation: a context whose diagnostics go into `result`.
class Session {
public:
  explicit Session(attnCompilerResult &result)
      : result(result), os(result.diagnostics) {
    DialectRegistry registry;
    mlir::attn::registerAllDialects(registry);
    mlir::attn::registerKernelDialects(registry);
    mlir::attn::registerTargetDialectsAndInterfaces(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    context.printOpOnDiagnostic(false);
    handler = std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr,
                                                           &context, os);
  }

  attnCompilerStatus fail(attnCompilerStatus status,
                          const llvm::Twine &message = "") {
    if (!message.isTriviallyEmpty())
      os << "error: " << message << "\n";
    return result.status = status;
  }

  /// Stages 1 and 2.
  OwningOpRef<ModuleOp> parse(const char *text, attnCompilerStatus &status) {
    auto start = Clock::now();
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "attn.mlir"), llvm::SMLoc());
    ParserConfig config(&context, /*verifyAfterParse=*/false);
    OwningOpRef<ModuleOp> module =
        parseSourceFile<ModuleOp>(sourceMgr, config);
    result.stages.push_back({"parse", msSince(start)});
    if (!module) {
      status = fail(ATTN_COMPILER_PARSE_ERROR);
      return nullptr;
    }
    start = Clock::now();
    if (failed(verify(*module))) {
      status = fail(ATTN_COMPILER_VERIFY_ERROR);
      return nullptr;
    }
    result.stages.push_back({"verify", msSince(start)});
    status = ATTN_COMPILER_OK;
    return module;
  }

  MLIRContext context{MLIRContext::Threading::DISABLED};
  llvm::SourceMgr sourceMgr;
  attnCompilerResult &result;
  llvm::raw_string_ostream os;
  std::unique_ptr<SourceMgrDiagnosticHandler> handler;
};

attnCompilerStatus compile(attnCompilerResult &result, const char *text,
                           const attnCompilerOptions *options) {
  Session s(result);
  if (!text)
    return s.fail(ATTN_COMPILER_INVALID_ARGUMENT, "attn_ir is NULL");
  attnCompilerOptions defaults;
  attnCompilerOptionsInit(&defaults);
  const attnCompilerOptions &o = options ? *options : defaults;

  mlir::attn::NVPTXOptions target;
  target.chip = o.chip && *o.chip ? o.chip : mlir::attn::kDefaultChip;
  target.features = o.features ? o.features : "";
  target.cudaPath = o.cuda_path ? o.cuda_path : "";
  if (o.opt_level < 0 || o.opt_level > 3)
    return s.fail(ATTN_COMPILER_INVALID_ARGUMENT,
                  llvm::formatv("opt_level {0} is not in 0..3", o.opt_level));
  target.optLevel = unsigned(o.opt_level);
  if (llvm::Error err = target.validate())
    return s.fail(ATTN_COMPILER_INVALID_ARGUMENT,
                  llvm::toString(std::move(err)));

  attnCompilerStatus status;
  OwningOpRef<ModuleOp> module = s.parse(text, status);
  if (!module)
    return status;
  if (llvm::Error err = mlir::attn::checkHoldsKernelOps(*module))
    return s.fail(ATTN_COMPILER_INVALID_ARGUMENT,
                  llvm::toString(std::move(err)));

  auto start = Clock::now();
  PassManager pm(&s.context);
  mlir::attn::AttnPrepareOptions prepare;
  prepare.chip = target.chip;
  if (o.kv_tma != 0 && o.kv_tma != 1)
    return s.fail(ATTN_COMPILER_INVALID_ARGUMENT,
                  llvm::formatv("kv_tma {0} is not 0 or 1", o.kv_tma));
  prepare.kvTma = o.kv_tma == 1;
  mlir::attn::buildAttnPreparePipeline(pm, prepare);
  if (failed(pm.run(*module)))
    return s.fail(ATTN_COMPILER_PIPELINE_ERROR);
  result.stages.push_back({"prepare", msSince(start)});
  {
    llvm::raw_string_ostream irOs(result.ir);
    module->print(irOs);
  }

  result.generator = "attn-outline-kernels + convert-attn-to-gpu";
  mlir::attn::AttentionKernelOptions kernelOptions;
  kernelOptions.emit =
      o.manifest_only ? mlir::attn::AttentionKernelOptions::Emit::None
      : o.emit_cubin  ? mlir::attn::AttentionKernelOptions::Emit::Cubin
                      : mlir::attn::AttentionKernelOptions::Emit::PTX;
  if (o.candidate < -1)
    return s.fail(ATTN_COMPILER_INVALID_ARGUMENT,
                  llvm::formatv("candidate {0} is not -1 (all) or a candidate "
                                "index",
                                o.candidate));
  kernelOptions.candidate = o.candidate;
  auto kernels =
      mlir::attn::compileAttentionKernels(*module, target, kernelOptions);
  if (!kernels) {
    std::string message = llvm::toString(kernels.takeError());
    // Generator diagnostics are already in the result; a target error is not.
    return s.fail(result.diagnostics.empty() ? ATTN_COMPILER_TARGET_ERROR
                                             : ATTN_COMPILER_CODEGEN_ERROR,
                  message);
  }
  for (const mlir::attn::StageTime &st : kernels->stages)
    result.stages.push_back({st.stage, st.milliseconds});
  result.ptx = std::move(kernels->ptx);
  result.cubin = std::move(kernels->cubin);
  llvm::json::Object doc = std::move(kernels->manifest);
  doc["compiler_version"] = attnCompilerVersion();
  doc["generator"] = result.generator;
  result.manifest =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))).str();
  return result.status = ATTN_COMPILER_OK;
}

/// attn IR for a description: one func.func holding one attn.attention.
std::string describeAttention(const attnCompilerAttentionDesc &d,
                              std::string &error) {
  std::string dtype = d.dtype ? d.dtype : "bf16";
  std::string layout = d.layout ? d.layout : "NHD";
  if (dtype != "bf16" && dtype != "f16")
    error = "dtype must be \"bf16\" or \"f16\", got \"" + dtype + "\"";
  else if (layout != "NHD" && layout != "HND")
    error = "layout must be \"NHD\" or \"HND\", got \"" + layout + "\"";
  else if (d.head_dim <= 0 || d.num_qo_heads <= 0 || d.num_kv_heads <= 0 ||
           d.page_size <= 0 || d.query_rows < 0)
    error = "head_dim, num_qo_heads, num_kv_heads and page_size must be "
            "positive, query_rows positive or 0 (varies per batch)";
  if (!error.empty())
    return "";
  std::string q = llvm::formatv("tensor<?x{0}x{1}x{2}>", d.num_qo_heads,
                                d.head_dim, dtype);
  std::string kv =
      layout == "NHD"
          ? llvm::formatv("tensor<?x{0}x{1}x{2}x{3}>", d.page_size,
                          d.num_kv_heads, d.head_dim, dtype)
                .str()
          : llvm::formatv("tensor<?x{0}x{1}x{2}x{3}>", d.num_kv_heads,
                          d.page_size, d.head_dim, dtype)
                .str();
  std::string lse = llvm::formatv("tensor<?x{0}xf32>", d.num_qo_heads);
  std::string variants;
  if (d.variants && *d.variants) {
    llvm::SmallVector<llvm::StringRef> names;
    llvm::StringRef(d.variants).split(names, ',', -1, false);
    for (llvm::StringRef n : names)
      variants += (variants.empty() ? "@" : ", @") + n.trim().str();
  }
  std::string text = d.variant_defs ? std::string(d.variant_defs) + "\n" : "";
  bool lastLen = d.page_size > 1;
  text += llvm::formatv(
      "func.func @attention(%q: {0}, %k: {1}, %v: {1}, %qo: tensor<?xi32>, "
      "%kp: tensor<?xi32>, %ki: tensor<?xi32>{9}{7}) -> ({0}, {2}) {{\n"
      "  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = "
      "{3}, block_cols = {4}, layout = {5}>) indices(%qo, %kp, %ki{10} : "
      "tensor<?xi32>, tensor<?xi32>, tensor<?xi32>{11}){8}{6} : "
      "{0}, {1}, {1} -> {0}, {2}\n"
      "  return %o, %lse : {0}, {2}\n}\n",
      q, kv, lse,
      d.query_rows ? std::to_string(d.query_rows) : std::string("?"),
      d.page_size, layout,
      variants.empty() ? std::string() : " variants [" + variants + "]",
      d.custom_mask ? ", %mask: tensor<?xi8>" : "",
      d.custom_mask ? " mask(%mask : tensor<?xi8>)" : "",
      // block_cols = 1 (the column-vector form) has no last-page length.
      lastLen ? ", %kl: tensor<?xi32>" : "", lastLen ? ", %kl" : "",
      lastLen ? ", tensor<?xi32>" : "");
  return text;
}

template <typename F>
attnCompilerStatus guarded(attnCompilerResult_t *out, F &&f) {
  auto *r = new attnCompilerResult();
  try {
    f(*r);
  } catch (const std::exception &e) {
    r->status = ATTN_COMPILER_INTERNAL_ERROR;
    r->diagnostics += std::string("error: internal error: ") + e.what() + "\n";
  } catch (...) {
    r->status = ATTN_COMPILER_INTERNAL_ERROR;
    r->diagnostics += "error: internal error\n";
  }
  attnCompilerStatus status = r->status;
  if (out)
    *out = r;
  else
    delete r;
  return status;
}

} // namespace

//===----------------------------------------------------------------------===//
// C entry points
//===----------------------------------------------------------------------===//

const char *attnCompilerVersion(void) {
  return "attn " ATTN_VERSION_STRING " (llvm " LLVM_VERSION_STRING ")";
}

const char *attnCompilerStatusName(attnCompilerStatus status) {
  switch (status) {
  case ATTN_COMPILER_OK: return "Ok";
  case ATTN_COMPILER_INVALID_ARGUMENT: return "InvalidArgument";
  case ATTN_COMPILER_PARSE_ERROR: return "ParseError";
  case ATTN_COMPILER_VERIFY_ERROR: return "VerifyError";
  case ATTN_COMPILER_PIPELINE_ERROR: return "PipelineError";
  case ATTN_COMPILER_UNSUPPORTED: return "Unsupported";
  case ATTN_COMPILER_CODEGEN_ERROR: return "CodegenError";
  case ATTN_COMPILER_TARGET_ERROR: return "TargetError";
  case ATTN_COMPILER_INTERNAL_ERROR: return "InternalError";
  }
  return "Unknown";
}

void attnCompilerOptionsInit(attnCompilerOptions *options) {
  if (!options)
    return;
  options->chip = mlir::attn::kDefaultChip;
  options->features = nullptr;
  options->cuda_path = nullptr;
  options->manifest_only = 0;
  options->candidate = -1;
  options->kv_tma = 0;
  options->opt_level = 3;
  options->emit_cubin = 1;
}

attnCompilerStatus attnCompilerVerifyVariant(const char *text,
                                             attnCompilerResult_t *result) {
  return guarded(result, [&](attnCompilerResult &r) {
    Session s(r);
    if (!text) {
      s.fail(ATTN_COMPILER_INVALID_ARGUMENT, "text is NULL");
      return;
    }
    attnCompilerStatus status;
    OwningOpRef<ModuleOp> module = s.parse(text, status);
    if (module) {
      llvm::raw_string_ostream irOs(r.ir);
      module->print(irOs);
    }
    r.status = status;
  });
}

attnCompilerStatus attnCompilerCompile(const char *attn_ir,
                                       const attnCompilerOptions *options,
                                       attnCompilerResult_t *result) {
  return guarded(result, [&](attnCompilerResult &r) {
    compile(r, attn_ir, options);
  });
}

attnCompilerStatus
attnCompilerCompileAttention(const attnCompilerAttentionDesc *desc,
                             const attnCompilerOptions *options,
                             attnCompilerResult_t *result) {
  return guarded(result, [&](attnCompilerResult &r) {
    std::string error = desc ? "" : "desc is NULL";
    std::string text = desc ? describeAttention(*desc, error) : "";
    if (!error.empty()) {
      r.status = ATTN_COMPILER_INVALID_ARGUMENT;
      r.diagnostics = "error: " + error + "\n";
      return;
    }
    compile(r, text.c_str(), options);
  });
}

attnCompilerStatus attnCompilerResultStatus(attnCompilerResult_t r) {
  return r ? r->status : ATTN_COMPILER_INVALID_ARGUMENT;
}
const char *attnCompilerResultDiagnostics(attnCompilerResult_t r) {
  return r ? r->diagnostics.c_str() : "";
}
const char *attnCompilerResultIR(attnCompilerResult_t r) {
  return r ? r->ir.c_str() : "";
}
const char *attnCompilerResultPtx(attnCompilerResult_t r) {
  return r ? r->ptx.c_str() : "";
}
const void *attnCompilerResultCubin(attnCompilerResult_t r, size_t *bytes) {
  if (bytes)
    *bytes = r ? r->cubin.size() : 0;
  return r && !r->cubin.empty() ? r->cubin.data() : nullptr;
}
const char *attnCompilerResultManifest(attnCompilerResult_t r) {
  return r ? r->manifest.c_str() : "";
}
const char *attnCompilerResultGenerator(attnCompilerResult_t r) {
  return r ? r->generator.c_str() : "";
}
int32_t attnCompilerResultNumStages(attnCompilerResult_t r) {
  return r ? int32_t(r->stages.size()) : 0;
}
const char *attnCompilerResultStageName(attnCompilerResult_t r, int32_t i) {
  return r && i >= 0 && size_t(i) < r->stages.size()
             ? r->stages[i].first.c_str()
             : "";
}
double attnCompilerResultStageMilliseconds(attnCompilerResult_t r, int32_t i) {
  return r && i >= 0 && size_t(i) < r->stages.size() ? r->stages[i].second
                                                      : 0.0;
}
void attnCompilerResultDestroy(attnCompilerResult_t r) { delete r; }
