/*===- attn-c/Compiler.h - C API of the attn compiler -------------*- C -*-===*\
|*                                                                            *|
|* Part of attn, an MLIR-based attention compiler for LLM inference serving.  *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The compiler's C API, for the Python package's compile-on-first-use path   *|
|* and other languages: verify a variant written as attn hook regions, and    *|
|* compile attn IR (or a plain attention description) to PTX / cubin plus the *|
|* kernel manifest the runtime reads (docs/Manifest.md).                      *|
|*                                                                            *|
|* Every call returns an attnCompilerStatus and, when `result` is non-NULL,   *|
|* always creates a result object, also on failure: it holds the compiler's   *|
|* own diagnostics (file:line:col: error: ...), so callers can show them.     *|
|* Bad input (unparsable text, failing verifiers, an unknown chip, a PTX      *|
|* version too old for the chip) is an error status, never a crash: options   *|
|* are validated before LLVM sees them. Exported from libattn_compiler.so.    *|
|*                                                                            *|
|* Thread safety: each call uses its own MLIRContext; results are immutable.  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ATTN_C_COMPILER_H
#define ATTN_C_COMPILER_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ATTN_COMPILER_EXPORT __declspec(dllexport)
#else
#define ATTN_COMPILER_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attnCompilerStatus {
  ATTN_COMPILER_OK = 0,
  ATTN_COMPILER_INVALID_ARGUMENT = 1, /* NULL input, bad options (chip, features) */
  ATTN_COMPILER_PARSE_ERROR = 2,      /* the text is not valid MLIR */
  ATTN_COMPILER_VERIFY_ERROR = 3,     /* parsed, but a verifier rejected it */
  ATTN_COMPILER_PIPELINE_ERROR = 4,   /* attn-prepare-pipeline failed */
  ATTN_COMPILER_UNSUPPORTED = 5,      /* no kernel generator for this attention yet */
  ATTN_COMPILER_CODEGEN_ERROR = 6,    /* kernel generation failed */
  ATTN_COMPILER_TARGET_ERROR = 7,     /* NVVM lowering, PTX emission or ptxas failed */
  ATTN_COMPILER_INTERNAL_ERROR = 8
} attnCompilerStatus;

/* What to compile for. Initialise with attnCompilerOptionsInit. */
typedef struct attnCompilerOptions {
  const char *chip;      /* "sm_80", "sm_90", "sm_90a", ...; NULL: the default (sm_90) */
  const char *features;  /* e.g. "+ptx80"; NULL or "": the chip's default */
  const char *cuda_path; /* toolkit root for ptxas/libdevice; NULL: $CUDA_HOME, /usr/local/cuda */
  int32_t opt_level;     /* LLVM -O level 0..3 */
  int32_t emit_cubin;    /* 1: run ptxas and return a cubin; 0: PTX only */
  int32_t manifest_only; /* 1: no code at all, only the manifest of every kernel
                            (their launch contracts: tile candidates, costs,
                            arguments), in milliseconds */
  int32_t candidate;     /* -1: every tile candidate's kernels; i >= 0: only
                            those of candidate i of each attention (its
                            attention kernel and merge kernel) */
  int32_t kv_tma;        /* 1: the tiles chosen load whole K/V tiles by TMA
                            where the tile and the pages can (warp-specialized
                            wgmma tiles, sm_90a); 0: cp.async everywhere */
} attnCompilerOptions;

/* A plain description of one attention, for callers that do not write IR.
 * attnCompilerCompileAttention turns it into the same attn IR the Python
 * package writes (see attnCompilerResultIR) and compiles that. */
typedef struct attnCompilerAttentionDesc {
  int32_t head_dim, num_qo_heads, num_kv_heads;
  int32_t page_size;     /* tokens per KV page (block_cols) */
  int32_t query_rows;    /* query rows per request the kernels are built for:
                            1 for decode; 0 when it varies per batch (every
                            tile candidate, the planner picks one) */
  const char *dtype;     /* "bf16" | "f16" */
  const char *layout;    /* "NHD" | "HND" */
  const char *variants;  /* comma-separated variant names in order, or NULL */
  const char *variant_defs; /* attn.variant definitions (MLIR text) or NULL */
  int32_t custom_mask;   /* nonzero: a bit-packed custom mask (tensor<?xi8>)
                            operand; the kernels then take custom_mask and
                            mask_indptr (docs/Manifest.md). Replaces causal. */
} attnCompilerAttentionDesc;

typedef struct attnCompilerResult *attnCompilerResult_t;

/* "attn <version> (<generator>, llvm <version>)": part of every cache key. */
ATTN_COMPILER_EXPORT const char *attnCompilerVersion(void);
ATTN_COMPILER_EXPORT const char *attnCompilerStatusName(attnCompilerStatus status);
ATTN_COMPILER_EXPORT void attnCompilerOptionsInit(attnCompilerOptions *options);

/* Parses `text` (one or more attn.variant definitions, or any attn module)
 * and runs the verifiers. The result's diagnostics hold every message. */
ATTN_COMPILER_EXPORT attnCompilerStatus
attnCompilerVerifyVariant(const char *text, attnCompilerResult_t *result);

/* Compiles a module of attn IR (func.func bodies holding attn.attention, plus
 * any custom attn.variant definitions): parse, verify, attn-prepare-pipeline,
 * kernel generation, NVVM, PTX and (emit_cubin) ptxas. */
ATTN_COMPILER_EXPORT attnCompilerStatus
attnCompilerCompile(const char *attn_ir, const attnCompilerOptions *options,
                    attnCompilerResult_t *result);

/* Builds attn IR from `desc` and compiles it like attnCompilerCompile. */
ATTN_COMPILER_EXPORT attnCompilerStatus
attnCompilerCompileAttention(const attnCompilerAttentionDesc *desc,
                             const attnCompilerOptions *options,
                             attnCompilerResult_t *result);

/* Result accessors. Strings are NUL-terminated and owned by the result; an
 * absent artifact is "" with size 0. */
ATTN_COMPILER_EXPORT attnCompilerStatus attnCompilerResultStatus(attnCompilerResult_t r);
ATTN_COMPILER_EXPORT const char *attnCompilerResultDiagnostics(attnCompilerResult_t r);
ATTN_COMPILER_EXPORT const char *attnCompilerResultIR(attnCompilerResult_t r);
ATTN_COMPILER_EXPORT const char *attnCompilerResultPtx(attnCompilerResult_t r);
ATTN_COMPILER_EXPORT const void *attnCompilerResultCubin(attnCompilerResult_t r,
                                                         size_t *bytes);
ATTN_COMPILER_EXPORT const char *attnCompilerResultManifest(attnCompilerResult_t r);
/* The kernel generator that produced the kernels ("convert-attn-to-gpu");
 * "" when none ran. */
ATTN_COMPILER_EXPORT const char *attnCompilerResultGenerator(attnCompilerResult_t r);
/* Per-stage wall times, in order ("parse", "prepare", "codegen",
 * "lower-to-nvvm", "llvm-to-ptx", "ptxas"). */
ATTN_COMPILER_EXPORT int32_t attnCompilerResultNumStages(attnCompilerResult_t r);
ATTN_COMPILER_EXPORT const char *attnCompilerResultStageName(attnCompilerResult_t r,
                                                             int32_t i);
ATTN_COMPILER_EXPORT double attnCompilerResultStageMilliseconds(attnCompilerResult_t r,
                                                                int32_t i);
ATTN_COMPILER_EXPORT void attnCompilerResultDestroy(attnCompilerResult_t r);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_C_COMPILER_H */
