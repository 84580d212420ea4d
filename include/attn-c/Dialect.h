/*===- attn-c/Dialect.h - C API of the attn dialect ----------------*- C -*-===*\
|*                                                                            *|
|* Part of attn, an MLIR-based attention compiler for LLM inference serving.  *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The attn dialect in MLIR's C API style (mlir-c/IR.h, BuiltinAttributes.h), *|
|* for compilers not written in C++: register the dialect, its passes and     *|
|* pipelines, build and read the #attn.bsr / #attn.composed / #attn.tile      *|
|* attributes, build the attn ops, and use MLIR's own C API                   *|
|* (mlirModuleCreateParse, mlirPassManager*, mlirOperationPrint, ...) on the  *|
|* IR.                                                                        *|
|*                                                                            *|
|* Exported, together with MLIR's C API (mlir-c/IR.h, BuiltinAttributes.h,    *|
|* BuiltinTypes.h, Pass.h, Diagnostics.h, Support.h, AffineMap.h, ...), from  *|
|* libattn_mlir_c.so (CMake: attn::CAPIDialect). That one library holds the   *|
|* MLIR the attn dialect and passes are built on, so link it alone: do not    *|
|* link MLIR's own MLIRCAPI* archives or libMLIR.so next to it (two copies of *|
|* MLIR in one process do not share dialects, passes or types).               *|
|*                                                                            *|
|* Invalid parameters: every attn...AttrGet runs the attribute's verifier;    *|
|* when it fails, the call emits an error diagnostic on the context (attach a *|
|* handler with mlirContextAttachDiagnosticHandler to see it; without one     *|
|* MLIR prints it to stderr) and returns a null attribute (mlirAttributeIsNull*|
|* is true). It never aborts. The getters require an attribute of their kind  *|
|* (check with the attnAttributeIsA... predicates first).                     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ATTN_C_DIALECT_H
#define ATTN_C_DIALECT_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Registration
 *===----------------------------------------------------------------------===*/

/* mlirGetDialectHandle__attn__(): the attn dialect alone. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Attn, attn);

/* Inserts every dialect attn's pipelines create or read (attn, func, arith,
 * affine, cf, scf, math, memref, tensor, vector, gpu, nvgpu, nvvm, llvm, ...)
 * and the interfaces the NVVM target needs (#nvvm.target, translation to
 * LLVM IR) into `registry`. */
MLIR_CAPI_EXPORTED void attnRegisterAllDialects(MlirDialectRegistry registry);

/* The same, appended to `context`'s registry, and the dialects loaded. */
MLIR_CAPI_EXPORTED void attnContextLoadAllDialects(MlirContext context);

/* Registers attn's passes and pipelines with the global pass registry, so
 * mlirParsePassPipeline / mlirOpPassManagerAddPipeline know them
 * (attn-prepare-pipeline, attn-outline-kernels, convert-attn-to-gpu,
 * attn-lower-to-nvvm, attn-to-nvvm-pipeline, ...; docs/Pipelines.md).
 * Idempotent; call it once before parsing a pipeline. */
MLIR_CAPI_EXPORTED void attnRegisterAllPasses(void);

/*===----------------------------------------------------------------------===*
 * Enums (the values of the C++ enums, attn/Dialect/Attn/IR/AttnEnums.td)
 *===----------------------------------------------------------------------===*/

typedef enum AttnKVLayout {
  ATTN_KV_LAYOUT_NHD = 0, /* [page, token, head, dim] */
  ATTN_KV_LAYOUT_HND = 1  /* [page, head, token, dim] */
} AttnKVLayout;

typedef enum AttnKVIndexing {
  ATTN_KV_INDEXING_PAGED = 0,
  ATTN_KV_INDEXING_RAGGED = 1
} AttnKVIndexing;

/*===----------------------------------------------------------------------===*
 * #attn.bsr<block_rows = R, block_cols = C, layout = L, indexing = I>
 *===----------------------------------------------------------------------===*/

MLIR_CAPI_EXPORTED bool attnAttributeIsABsr(MlirAttribute attr);

/* `block_rows` >= 1, or attnBsrAttrDynamicBlockRows() for `?` (query lengths
 * vary by batch); `block_cols` in [1, 65536], 1 when ragged. `layout` and
 * `indexing` are AttnKVLayout / AttnKVIndexing values. A null attribute when
 * the parameters are invalid (see the top of this file). */
MLIR_CAPI_EXPORTED MlirAttribute attnBsrAttrGet(MlirContext ctx,
                                                int64_t blockRows,
                                                int64_t blockCols,
                                                int32_t layout,
                                                int32_t indexing);

/* The `?` of block_rows (the same value as mlirShapedTypeGetDynamicSize). */
MLIR_CAPI_EXPORTED int64_t attnBsrAttrDynamicBlockRows(void);

MLIR_CAPI_EXPORTED int64_t attnBsrAttrGetBlockRows(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t attnBsrAttrGetBlockCols(MlirAttribute attr);
MLIR_CAPI_EXPORTED int32_t attnBsrAttrGetLayout(MlirAttribute attr);
MLIR_CAPI_EXPORTED int32_t attnBsrAttrGetIndexing(MlirAttribute attr);
/* How many i32 index arrays attn.attention takes for this view (2..4). */
MLIR_CAPI_EXPORTED intptr_t attnBsrAttrGetNumIndexArrays(MlirAttribute attr);
/* Name of index array `pos` ("qo_indptr", "kv_indptr", ...), in operand
 * order; owned by the context. */
MLIR_CAPI_EXPORTED MlirStringRef attnBsrAttrGetIndexArrayName(MlirAttribute attr,
                                                             intptr_t pos);
MLIR_CAPI_EXPORTED MlirTypeID attnBsrAttrGetTypeID(void);

/*===----------------------------------------------------------------------===*
 * #attn.composed<[#attn.bsr<...>, #attn.bsr<...>, ...]>
 *===----------------------------------------------------------------------===*/

MLIR_CAPI_EXPORTED bool attnAttributeIsAComposed(MlirAttribute attr);

/* `numViews` >= 2 #attn.bsr views sharing block_cols, layout and indexing.
 * A null attribute when a view is not an #attn.bsr or the verifier fails. */
MLIR_CAPI_EXPORTED MlirAttribute attnComposedAttrGet(MlirContext ctx,
                                                     intptr_t numViews,
                                                     MlirAttribute const *views);
MLIR_CAPI_EXPORTED intptr_t attnComposedAttrGetNumViews(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirAttribute attnComposedAttrGetView(MlirAttribute attr,
                                                         intptr_t pos);
MLIR_CAPI_EXPORTED MlirTypeID attnComposedAttrGetTypeID(void);

/*===----------------------------------------------------------------------===*
 * #attn.tile<q = Q, kv = KV, warps = W, stages = S, gqa_pack = G,
 *            ctas_per_sm = C>
 *===----------------------------------------------------------------------===*/

MLIR_CAPI_EXPORTED bool attnAttributeIsATile(MlirAttribute attr);

/* q in {16, 64, 128, 192} (192: wgmma targets only); kv a multiple of 16 in
 * [16, 256]; warps in [1, 16] (q / 16 when q > 16); stages in [1, 8];
 * gqa_pack in [1, q]; ctas_per_sm in [1, 32]. The textual defaults are
 * stages 2, gqa_pack 1, ctas_per_sm 1. A null attribute when the parameters
 * are invalid. */
MLIR_CAPI_EXPORTED MlirAttribute attnTileAttrGet(MlirContext ctx, int64_t q,
                                                 int64_t kv, int64_t warps,
                                                 int64_t stages,
                                                 int64_t gqaPack,
                                                 int64_t ctasPerSM);
MLIR_CAPI_EXPORTED int64_t attnTileAttrGetQ(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t attnTileAttrGetKv(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t attnTileAttrGetWarps(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t attnTileAttrGetStages(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t attnTileAttrGetGqaPack(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t attnTileAttrGetCtasPerSM(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirTypeID attnTileAttrGetTypeID(void);

/*===----------------------------------------------------------------------===*
 * Operations
 *
 * Each builder creates its op at `loc`, detached: insert it with
 * mlirBlockInsertOwnedOperation* (or destroy it with mlirOperationDestroy).
 * The op's verifier runs first; when it fails, the builder emits its message
 * as an error diagnostic and returns a null operation (mlirOperationIsNull),
 * never aborting. Result types are derived from the operands, as the textual
 * form states them.
 *===----------------------------------------------------------------------===*/

/* attn.attention: query [rows, Hq, D], key/value caches in the format's
 * layout, the format's i32 index arrays (view after view), an optional
 * custom mask and sm_scale (pass a null MlirValue to leave one out), the
 * variants by name ("causal", "soft_cap", ...; in application order) and
 * their runtime parameters. Results: output (the query's type) and lse
 * (tensor<rows x Hq x f32>). */
MLIR_CAPI_EXPORTED MlirOperation attnAttentionOpCreate(
    MlirLocation loc, MlirValue query, MlirValue keyCache,
    MlirValue valueCache, MlirAttribute format, intptr_t numIndices,
    MlirValue const *indices, MlirValue mask, MlirValue smScale,
    intptr_t numVariants, MlirStringRef const *variants, intptr_t numParams,
    MlirValue const *params);

/* attn.merge_states of `numStates` partial results (outputs and their LSEs,
 * in matching order) into an output of element type `outputElementType`
 * (e.g. bf16 from f32 partials; a null type keeps the partials' type). */
MLIR_CAPI_EXPORTED MlirOperation attnMergeStatesOpCreate(
    MlirLocation loc, intptr_t numStates, MlirValue const *outputs,
    MlirValue const *lses, MlirType outputElementType);

/* attn.append_kv: new keys/values [tokens, Hkv, D] into the caches of the
 * single paged view `format`, through its index arrays (batch_indices,
 * positions, kv_indptr, kv_indices). Results: the updated caches. */
MLIR_CAPI_EXPORTED MlirOperation attnAppendKVOpCreate(
    MlirLocation loc, MlirValue key, MlirValue value, MlirValue keyCache,
    MlirValue valueCache, MlirAttribute format, intptr_t numIndices,
    MlirValue const *indices);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_C_DIALECT_H */
