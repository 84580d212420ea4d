//===- ExpandVariants.cpp - materialize built-in variants -----------------===//
//
// Copies the built-in variants that attention ops name, and that the module
// does not define itself, from the dialect's library into the module. After
// this pass every variant is an attn.variant the kernel generator can inline.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNEXPANDVARIANTSPASS
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

#define DEBUG_TYPE "attn-expand-variants"

using namespace mlir;
using namespace mlir::attn;

namespace {
struct AttnExpandVariantsPass
    : attn::impl::AttnExpandVariantsPassBase<AttnExpandVariantsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto *dialect = getContext().getLoadedDialect<AttnDialect>();
    SymbolTable symbols(module);

    // Names in first-use order, so the output is deterministic.
    llvm::SetVector<StringAttr> missing;
    module.walk([&](AttentionOp op) {
      for (StringRef name : op.getVariantNames())
        if (!symbols.lookup(name))
          missing.insert(StringAttr::get(&getContext(), name));
    });

    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    for (StringAttr name : missing) {
      Operation *builtin = dialect->lookupBuiltinVariant(name.getValue());
      if (!builtin) {
        module.emitError() << "unknown variant @" << name.getValue();
        return signalPassFailure();
      }
      builder.clone(*builtin);
    }
  }
};
} // namespace
