/*===- dialect_c.c - the attn dialect through MLIR's C API ----------------===*\
|*                                                                            *|
|* Links attn::CAPIDialect (libattn_mlir_c.so) alone, as a compiler not       *|
|* written in C++ would: a context with the attn dialect and every dialect    *|
|* its pipelines need; #attn.bsr, #attn.composed and #attn.tile built and     *|
|* read back; invalid parameters give null attributes and a diagnostic; a     *|
|* module with attn.attention (the built #attn.bsr printed into it) parsed,   *|
|* lowered with attn's pipelines through mlirPassManager*, and the kernels    *|
|* checked: gpu.funcs after attn-outline-kernels, gpu.kernel llvm.funcs in a  *|
|* gpu.module with an #nvvm.target after attn-to-nvvm-pipeline; the same      *|
|* attention built with the C op builders (and merge_states, append_kv;       *|
|* invalid operands a null op and a diagnostic), lowered the same way. No GPU.*|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "attn-c/Dialect.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "dialect-c: FAILED: %s\n", what);
    ++failures;
  }
}

/* A growing string for mlir*Print callbacks. */
typedef struct {
  char *data;
  size_t size, capacity;
} Buffer;

static void append(MlirStringRef text, void *userData) {
  Buffer *b = (Buffer *)userData;
  if (b->size + text.length + 1 > b->capacity) {
    b->capacity = 2 * (b->size + text.length + 1);
    b->data = (char *)realloc(b->data, b->capacity);
  }
  memcpy(b->data + b->size, text.data, text.length);
  b->size += text.length;
  b->data[b->size] = '\0';
}

static char *printAttribute(MlirAttribute attr) {
  Buffer b = {NULL, 0, 0};
  mlirAttributePrint(attr, append, &b);
  return b.data;
}

static char *printOperation(MlirOperation op) {
  Buffer b = {NULL, 0, 0};
  mlirOperationPrint(op, append, &b);
  return b.data;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
    ++n;
  return n;
}

/* Counts the error diagnostics, keeps the last message. */
typedef struct {
  int errors;
  char last[512];
} Diagnostics;

static void appendDiagnostic(MlirStringRef text, void *userData) {
  Diagnostics *d = (Diagnostics *)userData;
  size_t used = strlen(d->last);
  size_t n = text.length < sizeof(d->last) - used - 1 ? text.length
                                                      : sizeof(d->last) - used - 1;
  memcpy(d->last + used, text.data, n);
  d->last[used + n] = '\0';
}

static MlirLogicalResult onDiagnostic(MlirDiagnostic diagnostic, void *userData) {
  Diagnostics *d = (Diagnostics *)userData;
  if (mlirDiagnosticGetSeverity(diagnostic) == MlirDiagnosticError)
    ++d->errors;
  d->last[0] = '\0';
  mlirDiagnosticPrint(diagnostic, appendDiagnostic, d);
  return mlirLogicalResultSuccess();
}

/* The attention op of a module (the first), found with mlirOperationWalk. */
static MlirWalkResult findAttention(MlirOperation op, void *userData) {
  MlirIdentifier name = mlirOperationGetName(op);
  MlirStringRef s = mlirIdentifierStr(name);
  if (s.length == 14 && !strncmp(s.data, "attn.attention", 14)) {
    *(MlirOperation *)userData = op;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

/* Runs `pipeline` (textual, anchored on builtin.module) on `module`. */
static int runPipeline(MlirContext ctx, MlirModule module, const char *pipeline) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  Buffer error = {NULL, 0, 0};
  int ok = mlirLogicalResultIsSuccess(mlirParsePassPipeline(
      opm, mlirStringRefCreateFromCString(pipeline), append, &error));
  if (!ok)
    printf("dialect-c: the pipeline %s does not parse: %s\n", pipeline,
           error.data ? error.data : "");
  free(error.data);
  if (ok)
    ok = mlirLogicalResultIsSuccess(
        mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)));
  mlirPassManagerDestroy(pm);
  return ok;
}

static const char *kModule =
    "func.func @decode(%%q: tensor<?x32x128xbf16>, %%k: tensor<?x16x8x128xbf16>,\n"
    "                  %%v: tensor<?x16x8x128xbf16>, %%qo: tensor<?xi32>,\n"
    "                  %%kp: tensor<?xi32>, %%ki: tensor<?xi32>, %%kl: tensor<?xi32>)\n"
    "    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {\n"
    "  %%o, %%lse = attn.attention %%q, %%k, %%v format(%s)\n"
    "      indices(%%qo, %%kp, %%ki, %%kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)\n"
    "      variants [@causal]\n"
    "      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>\n"
    "      -> tensor<?x32x128xbf16>, tensor<?x32xf32>\n"
    "  return %%o, %%lse : tensor<?x32x128xbf16>, tensor<?x32xf32>\n"
    "}\n";

/* A function whose body the C builders fill: its arguments are the operands,
 * and its return first returns placeholders (%q, %lse0), then the attention's
 * results. */
static const char *kShell =
    "func.func @decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>,\n"
    "                  %v: tensor<?x16x8x128xbf16>, %qo: tensor<?xi32>,\n"
    "                  %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>,\n"
    "                  %lse0: tensor<?x32xf32>, %kn: tensor<?x8x128xbf16>,\n"
    "                  %vn: tensor<?x8x128xbf16>, %bi: tensor<?xi32>, %pos: tensor<?xi32>)\n"
    "    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {\n"
    "  return %q, %lse0 : tensor<?x32x128xbf16>, tensor<?x32xf32>\n"
    "}\n";

int main(void) {
  /* 1. A context: the attn dialect by its handle, then everything the
   *    pipelines need through the registry call. */
  MlirContext ctx = mlirContextCreate();
  MlirDialectHandle attnHandle = mlirGetDialectHandle__attn__();
  mlirDialectHandleRegisterDialect(attnHandle, ctx);
  MlirDialect attnDialect = mlirDialectHandleLoadDialect(attnHandle, ctx);
  MlirStringRef ns = mlirDialectGetNamespace(attnDialect);
  expect(!mlirDialectIsNull(attnDialect) && ns.length == 4 &&
             !strncmp(ns.data, "attn", 4),
         "the attn dialect loads by its handle");
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  attnRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirContextLoadAllAvailableDialects(ctx);
  expect(mlirContextGetNumLoadedDialects(ctx) > 10,
         "the pipelines' dialects are loaded");
  attnRegisterAllPasses();
  attnRegisterAllPasses(); /* idempotent */

  Diagnostics diagnostics;
  memset(&diagnostics, 0, sizeof(diagnostics));
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(ctx, onDiagnostic, &diagnostics, NULL);

  /* 2. Attributes built and read back. */
  MlirAttribute paged =
      attnBsrAttrGet(ctx, 1, 16, ATTN_KV_LAYOUT_NHD, ATTN_KV_INDEXING_PAGED);
  expect(!mlirAttributeIsNull(paged) && attnAttributeIsABsr(paged),
         "#attn.bsr<block_rows = 1, block_cols = 16>");
  expect(attnBsrAttrGetBlockRows(paged) == 1 && attnBsrAttrGetBlockCols(paged) == 16 &&
             attnBsrAttrGetLayout(paged) == ATTN_KV_LAYOUT_NHD &&
             attnBsrAttrGetIndexing(paged) == ATTN_KV_INDEXING_PAGED,
         "#attn.bsr parameters read back");
  expect(attnBsrAttrGetNumIndexArrays(paged) == 4, "a paged view has 4 index arrays");
  MlirStringRef last = attnBsrAttrGetIndexArrayName(paged, 3);
  expect(last.length == 11 && !strncmp(last.data, "kv_last_len", 11),
         "the paged view's last index array is kv_last_len");
  expect(mlirTypeIDEqual(mlirAttributeGetTypeID(paged), attnBsrAttrGetTypeID()),
         "#attn.bsr's TypeID");
  char *pagedText = printAttribute(paged);
  printf("dialect-c: built %s\n", pagedText);
  expect(mlirAttributeEqual(
             paged, mlirAttributeParseGet(ctx, mlirStringRefCreateFromCString(pagedText))),
         "#attn.bsr round-trips through its text");

  MlirAttribute ragged = attnBsrAttrGet(ctx, attnBsrAttrDynamicBlockRows(), 1,
                                        ATTN_KV_LAYOUT_HND, ATTN_KV_INDEXING_RAGGED);
  expect(!mlirAttributeIsNull(ragged) &&
             attnBsrAttrGetBlockRows(ragged) == attnBsrAttrDynamicBlockRows() &&
             attnBsrAttrGetNumIndexArrays(ragged) == 2,
         "#attn.bsr<block_rows = ?, block_cols = 1, layout = HND, indexing = ragged>");

  MlirAttribute views[2] = {
      attnBsrAttrGet(ctx, 64, 16, ATTN_KV_LAYOUT_NHD, ATTN_KV_INDEXING_PAGED), paged};
  MlirAttribute cascade = attnComposedAttrGet(ctx, 2, views);
  expect(!mlirAttributeIsNull(cascade) && attnAttributeIsAComposed(cascade) &&
             !attnAttributeIsABsr(cascade) && attnComposedAttrGetNumViews(cascade) == 2 &&
             mlirAttributeEqual(attnComposedAttrGetView(cascade, 1), paged) &&
             attnBsrAttrGetBlockRows(attnComposedAttrGetView(cascade, 0)) == 64,
         "#attn.composed of two views");
  char *cascadeText = printAttribute(cascade);
  printf("dialect-c: built %s\n", cascadeText);

  MlirAttribute tile = attnTileAttrGet(ctx, 16, 16, 3, 2, 4, 4);
  expect(!mlirAttributeIsNull(tile) && attnAttributeIsATile(tile) &&
             !attnAttributeIsABsr(tile),
         "#attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4, ctas_per_sm = 4>");
  expect(attnTileAttrGetQ(tile) == 16 && attnTileAttrGetKv(tile) == 16 &&
             attnTileAttrGetWarps(tile) == 3 && attnTileAttrGetStages(tile) == 2 &&
             attnTileAttrGetGqaPack(tile) == 4 && attnTileAttrGetCtasPerSM(tile) == 4,
         "#attn.tile parameters read back");
  char *tileText = printAttribute(tile);
  printf("dialect-c: built %s\n", tileText);
  expect(!attnAttributeIsATile(mlirUnitAttrGet(ctx)) &&
             !attnAttributeIsABsr(mlirUnitAttrGet(ctx)) &&
             !attnAttributeIsAComposed(mlirUnitAttrGet(ctx)),
         "the predicates reject a builtin attribute");
  expect(diagnostics.errors == 0, "no diagnostics from valid parameters");

  /* 3. Invalid parameters: a null attribute and one error each, no abort. */
  struct {
    const char *what;
    MlirAttribute attr;
  } invalid[] = {
      {"block_rows 0", attnBsrAttrGet(ctx, 0, 16, ATTN_KV_LAYOUT_NHD, ATTN_KV_INDEXING_PAGED)},
      {"block_cols 0", attnBsrAttrGet(ctx, 1, 0, ATTN_KV_LAYOUT_NHD, ATTN_KV_INDEXING_PAGED)},
      {"ragged with block_cols 16",
       attnBsrAttrGet(ctx, 1, 16, ATTN_KV_LAYOUT_NHD, ATTN_KV_INDEXING_RAGGED)},
      {"layout 7", attnBsrAttrGet(ctx, 1, 16, 7, ATTN_KV_INDEXING_PAGED)},
      {"indexing -1", attnBsrAttrGet(ctx, 1, 16, ATTN_KV_LAYOUT_NHD, -1)},
      {"a composed format of one view", attnComposedAttrGet(ctx, 1, views)},
      {"a composed format of views with different block_cols",
       attnComposedAttrGet(ctx, 2, (MlirAttribute[]){paged, ragged})},
      {"a composed format with a tile for a view",
       attnComposedAttrGet(ctx, 2, (MlirAttribute[]){paged, tile})},
      {"a composed format with a null view",
       attnComposedAttrGet(ctx, 2, (MlirAttribute[]){paged, mlirAttributeGetNull()})},
      {"tile q 32", attnTileAttrGet(ctx, 32, 16, 2, 2, 1, 1)},
      {"tile kv 24", attnTileAttrGet(ctx, 16, 24, 4, 2, 1, 1)},
      {"tile warps 3 for q 64", attnTileAttrGet(ctx, 64, 64, 3, 2, 1, 1)},
      {"tile stages 0", attnTileAttrGet(ctx, 16, 16, 4, 0, 1, 1)},
      {"tile gqa_pack 17 > q 16", attnTileAttrGet(ctx, 16, 16, 4, 2, 17, 1)},
      {"tile ctas_per_sm 33", attnTileAttrGet(ctx, 16, 16, 4, 2, 1, 33)},
  };
  int numInvalid = (int)(sizeof(invalid) / sizeof(invalid[0]));
  for (int i = 0; i < numInvalid; ++i) {
    char what[160];
    snprintf(what, sizeof(what), "%s gives a null attribute", invalid[i].what);
    expect(mlirAttributeIsNull(invalid[i].attr), what);
  }
  expect(diagnostics.errors == numInvalid, "one error diagnostic per invalid builder call");
  printf("dialect-c: %d invalid builder calls: null attributes, %d errors, "
         "the last: %s\n",
         numInvalid, diagnostics.errors, diagnostics.last);
  diagnostics.errors = 0;

  /* 4. A module with the built format printed into it, lowered. */
  char source[4096];
  snprintf(source, sizeof(source), kModule, pagedText);
  for (int stage = 0; stage < 2; ++stage) {
    MlirModule module =
        mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(source));
    expect(!mlirModuleIsNull(module), "the module parses");
    if (mlirModuleIsNull(module))
      break;
    MlirOperation attention = {NULL};
    mlirOperationWalk(mlirModuleGetOperation(module), findAttention, &attention,
                      MlirWalkPreOrder);
    expect(!mlirOperationIsNull(attention) &&
               mlirAttributeEqual(mlirOperationGetAttributeByName(
                                      attention, mlirStringRefCreateFromCString("format")),
                                  paged),
           "attn.attention's format is the built #attn.bsr");

    if (stage == 0) {
      /* The tile-level form: one gpu.func per kernel. */
      expect(runPipeline(ctx, module,
                         "builtin.module(attn-prepare-pipeline{chip=sm_90},"
                         "attn-outline-kernels{chip=sm_90})"),
             "attn-prepare-pipeline + attn-outline-kernels");
      MlirOperation op = {NULL};
      mlirOperationWalk(mlirModuleGetOperation(module), findAttention, &op,
                        MlirWalkPreOrder);
      MlirAttribute chosen = mlirOperationIsNull(op)
                                 ? mlirAttributeGetNull()
                                 : mlirOperationGetAttributeByName(
                                       op, mlirStringRefCreateFromCString("tile"));
      expect(!mlirAttributeIsNull(chosen) && attnAttributeIsATile(chosen) &&
                 attnTileAttrGetQ(chosen) == 16 && attnTileAttrGetGqaPack(chosen) >= 1,
             "the chosen #attn.tile on attn.attention reads back");
      if (!mlirAttributeIsNull(chosen) && attnAttributeIsATile(chosen))
        printf("dialect-c: chose q=%lld kv=%lld warps=%lld stages=%lld gqa_pack=%lld "
               "ctas_per_sm=%lld\n",
               (long long)attnTileAttrGetQ(chosen), (long long)attnTileAttrGetKv(chosen),
               (long long)attnTileAttrGetWarps(chosen),
               (long long)attnTileAttrGetStages(chosen),
               (long long)attnTileAttrGetGqaPack(chosen),
               (long long)attnTileAttrGetCtasPerSM(chosen));
      char *text = printOperation(mlirModuleGetOperation(module));
      int funcs = count(text, "gpu.func @attn_");
      printf("dialect-c: attn-outline-kernels: %d gpu.func kernels\n", funcs);
      expect(funcs == 2, "two gpu.func kernels (attention and merge)");
      expect(count(text, "gpu.func @attn_decode_") == 1, "the attention kernel");
      expect(count(text, "gpu.func @attn_merge_") == 1, "the merge kernel");
      expect(count(text, "attn.launch") >= 2, "the kernels carry #attn.launch");
      free(text);
    } else {
      /* The whole compiler as one registered pipeline. */
      expect(runPipeline(ctx, module, "builtin.module(attn-to-nvvm-pipeline{chip=sm_90})"),
             "attn-to-nvvm-pipeline");
      char *text = printOperation(mlirModuleGetOperation(module));
      expect(count(text, "gpu.module @attn_kernels [#nvvm.target<") == 1,
             "gpu.module @attn_kernels with an #nvvm.target");
      int kernels = count(text, "gpu.kernel");
      printf("dialect-c: attn-to-nvvm-pipeline: %d gpu.kernel llvm.funcs\n", kernels);
      expect(count(text, "llvm.func @attn_decode_") == 1 &&
                 count(text, "llvm.func @attn_merge_") == 1,
             "both kernels lowered to llvm.func");
      expect(count(text, "attn.kernels = [@attn_kernels::@attn_decode_") == 1,
             "attn.attention lists its kernel");
      free(text);
    }
    mlirModuleDestroy(module);
  }
  expect(diagnostics.errors == 0, "no diagnostics from the pipelines");
  if (diagnostics.errors)
    fprintf(stderr, "dialect-c: %s\n", diagnostics.last);

  /* 5. The same attention built with the C op builders, lowered. */
  {
    MlirModule module = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kShell));
    expect(!mlirModuleIsNull(module), "the function shell parses");
    MlirOperation func = mlirBlockGetFirstOperation(mlirModuleGetBody(module));
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    MlirOperation ret = mlirBlockGetTerminator(body);
    MlirValue arg[12];
    for (int i = 0; i < 12; ++i)
      arg[i] = mlirBlockGetArgument(body, i);
    MlirLocation loc = mlirLocationUnknownGet(ctx);
    MlirStringRef causal = mlirStringRefCreateFromCString("causal");
    MlirValue none = {NULL};
    MlirOperation att = attnAttentionOpCreate(loc, arg[0], arg[1], arg[2], paged, 4, &arg[3],
                                              none, none, 1, &causal, 0, NULL);
    expect(!mlirOperationIsNull(att), "attnAttentionOpCreate builds attn.attention");
    expect(diagnostics.errors == 0, "no diagnostics from a valid attention");
    if (!mlirOperationIsNull(att)) {
      mlirBlockInsertOwnedOperationBefore(body, ret, att);
      mlirOperationSetOperand(ret, 0, mlirOperationGetResult(att, 0));
      mlirOperationSetOperand(ret, 1, mlirOperationGetResult(att, 1));
      expect(mlirOperationVerify(mlirModuleGetOperation(module)), "the built module verifies");
      char *text = printOperation(mlirModuleGetOperation(module));
      expect(strstr(text, "attn.attention %arg0, %arg1, %arg2 format(#attn.bsr<") != NULL &&
                 strstr(text, "variants [@causal]") != NULL,
             "the built attention prints as its textual form");
      free(text);
    }

    /* merge_states of the attention's result with itself, into f32; append_kv. */
    MlirValue outs[2] = {mlirOperationGetResult(att, 0), mlirOperationGetResult(att, 0)};
    MlirValue lses[2] = {mlirOperationGetResult(att, 1), arg[7]};
    MlirOperation merge = attnMergeStatesOpCreate(loc, 2, outs, lses, mlirF32TypeGet(ctx));
    expect(!mlirOperationIsNull(merge) && mlirOperationGetNumResults(merge) == 2,
           "attnMergeStatesOpCreate builds attn.merge_states");
    MlirValue appendIndices[4] = {arg[10], arg[11], arg[4], arg[5]};
    MlirOperation append = attnAppendKVOpCreate(loc, arg[8], arg[9], arg[1], arg[2], paged,
                                                4, appendIndices);
    expect(!mlirOperationIsNull(append) && mlirOperationGetNumResults(append) == 2,
           "attnAppendKVOpCreate builds attn.append_kv");
    expect(diagnostics.errors == 0, "no diagnostics from valid merge and append ops");
    if (!mlirOperationIsNull(merge))
      mlirOperationDestroy(merge);
    if (!mlirOperationIsNull(append))
      mlirOperationDestroy(append);

    /* Invalid operands: a null operation and one error each, no abort. */
    MlirOperation invalid[] = {
        /* 3 index arrays for a paged view of 4 */
        attnAttentionOpCreate(loc, arg[0], arg[1], arg[2], paged, 3, &arg[3], none, none, 1,
                              &causal, 0, NULL),
        /* the query missing */
        attnAttentionOpCreate(loc, none, arg[1], arg[2], paged, 4, &arg[3], none, none, 0, NULL,
                              0, NULL),
        /* an i32 index array for the query */
        attnAttentionOpCreate(loc, arg[3], arg[1], arg[2], paged, 4, &arg[3], none, none, 0,
                              NULL, 0, NULL),
        /* no states */
        attnMergeStatesOpCreate(loc, 0, outs, lses, (MlirType){NULL}),
        /* a composed format for append_kv */
        attnAppendKVOpCreate(loc, arg[8], arg[9], arg[1], arg[2], cascade, 4, appendIndices),
        /* keys of the query's head count */
        attnAppendKVOpCreate(loc, arg[0], arg[0], arg[1], arg[2], paged, 4, appendIndices),
    };
    int numBad = (int)(sizeof(invalid) / sizeof(invalid[0]));
    int nulls = 0;
    for (int i = 0; i < numBad; ++i)
      nulls += mlirOperationIsNull(invalid[i]);
    expect(nulls == numBad, "every invalid op builder call gives a null operation");
    expect(diagnostics.errors == numBad, "one error diagnostic per invalid op builder call");
    printf("dialect-c: %d invalid op builder calls: %d null operations, %d errors, the last: %s\n",
           numBad, nulls, diagnostics.errors, diagnostics.last);
    diagnostics.errors = 0;

    expect(runPipeline(ctx, module, "builtin.module(attn-to-nvvm-pipeline{chip=sm_90})"),
           "attn-to-nvvm-pipeline on the built module");
    char *text = printOperation(mlirModuleGetOperation(module));
    expect(count(text, "llvm.func @attn_decode_") == 1 && count(text, "llvm.func @attn_merge_") == 1,
           "the built attention's kernels lowered to llvm.func");
    printf("dialect-c: the C-built attention lowered to %d gpu.kernel llvm.funcs\n",
           count(text, "gpu.kernel"));
    free(text);
    mlirModuleDestroy(module);
  }

  /* 6. Errors are results, not aborts: an unknown pass, IR with an invalid
   *    #attn.tile. */
  {
    MlirModule module = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(source));
    expect(!runPipeline(ctx, module, "builtin.module(attn-no-such-pass)"),
           "an unknown pass in the pipeline is an error");
    mlirModuleDestroy(module);
    MlirAttribute bad = mlirAttributeParseGet(
        ctx, mlirStringRefCreateFromCString("#attn.tile<q = 16, kv = 16, warps = 17>"));
    expect(mlirAttributeIsNull(bad) && diagnostics.errors == 1,
           "parsing an invalid #attn.tile gives a null attribute and an error");
    printf("dialect-c: parsing #attn.tile<q = 16, kv = 16, warps = 17>: %s\n",
           diagnostics.last);
  }

  free(pagedText);
  free(cascadeText);
  free(tileText);
  mlirContextDetachDiagnosticHandler(ctx, handler);
  mlirContextDestroy(ctx);
  if (failures) {
    fprintf(stderr, "dialect-c: %d checks failed\n", failures);
    return 1;
  }
  printf("dialect-c: OK\n");
  return 0;
}
