//===- attn-opt.cpp - the attn optimizer driver ---------------------------===//
//
// Registrations plus MlirOptMain: parses attn (and upstream) IR, runs attn
// passes and pipelines, prints the result. `attn-opt --help` lists them.
//
//===----------------------------------------------------------------------===//

#include "attn/InitAllDialects.h"
#include "attn/InitAllPasses.h"
#include "attn/Target/Passes.h"
#include "attn/Target/Serialization.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::attn::registerAllPasses();
  // Host code: one-shot bufferization of functions using the attn ops.
  mlir::bufferization::registerOneShotBufferizePass();
  // Kernels embedded in the program, attn ops to runtime calls, the pipeline.
  mlir::attn::registerAttnTargetPassesAndPipelines();
  mlir::DialectRegistry registry;
  mlir::attn::registerAllDialects(registry);
  // What attn-lower-to-nvvm and the host pipeline need: NVVM target
  // attributes, LLVM translations, host bufferization models.
  mlir::attn::registerTargetDialectsAndInterfaces(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn optimizer driver\n", registry));
}
