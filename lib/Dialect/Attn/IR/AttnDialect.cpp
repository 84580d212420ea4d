//===- AttnDialect.cpp - the attn dialect ---------------------------------===//
//
// Registers the dialect's attributes and operations, and owns the built-in
// variant library: an .mlir file compiled into the binary and parsed once per
// context on first use.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Mutex.h"

using namespace mlir;
using namespace mlir::attn;

namespace mlir::attn {
/// AttnOps.cpp: the tensor results' names (%output, %lse, ...).
void attachResultNames(MLIRContext *ctx);
} // namespace mlir::attn

#include "attn/Dialect/Attn/IR/AttnOpsDialect.cpp.inc"

#include "BuiltinVariants.inc"

void AttnDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "attn/Dialect/Attn/IR/AttnOps.cpp.inc"
      >();
  attachResultNames(getContext());
}

static llvm::sys::SmartMutex<true> builtinLibraryMutex;

Operation *AttnDialect::lookupBuiltinVariant(StringRef name) {
  llvm::sys::SmartScopedLock<true> lock(builtinLibraryMutex);
  if (!builtinLibraryParsed) {
    builtinLibraryParsed = true;
    ParserConfig config(getContext());
    builtinLibrary = parseSourceString<ModuleOp>(kBuiltinVariantLibrary, config,
                                                 "attn-builtin-variants");
    // The library is tested by lit; a parse failure here is a build defect.
    assert(builtinLibrary && "the built-in variant library does not parse");
  }
  if (!builtinLibrary)
    return nullptr;
  return SymbolTable::lookupSymbolIn(builtinLibrary->getOperation(), name);
}

SmallVector<StringRef> AttnDialect::getBuiltinVariantNames() {
  lookupBuiltinVariant("");
  SmallVector<StringRef> names;
  if (builtinLibrary)
    for (auto variant : builtinLibrary->getOps<VariantOp>())
      names.push_back(variant.getSymName());
  return names;
}
