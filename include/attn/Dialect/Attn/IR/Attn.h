//===- Attn.h - the attn dialect ---------------------------------*- C++ -*-===//
//
// Declares the attn dialect: its enums, KV-format and tile attributes, and
// operations. Include this header to use any part of the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTN_H
#define ATTN_DIALECT_ATTN_IR_ATTN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "attn/Dialect/Attn/IR/AttnOpsDialect.h.inc"

#include "attn/Dialect/Attn/IR/AttnEnums.h.inc"

namespace mlir::attn {
/// `?` or a positive count, for `#attn.bsr`'s block_rows.
FailureOr<int64_t> parseBlockRows(AsmParser &parser);
void printBlockRows(AsmPrinter &printer, int64_t blockRows);
/// `true` or `false`.
FailureOr<bool> parseFlag(AsmParser &parser);
} // namespace mlir::attn

#define GET_ATTRDEF_CLASSES
#include "attn/Dialect/Attn/IR/AttnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "attn/Dialect/Attn/IR/AttnOpsTypes.h.inc"

namespace mlir::attn {
/// The BSR views of a KV format (`#attn.bsr` or `#attn.composed`), in the
/// order the attention op takes their index arrays.
llvm::SmallVector<BsrAttr> getFormatViews(Attribute format);
/// The launch contract (`attn.launch`) of the kernel `op` is in, or null.
LaunchAttr getEnclosingLaunch(Operation *op);
} // namespace mlir::attn

namespace mlir::attn {
class HookOp;
} // namespace mlir::attn

#define GET_OP_CLASSES
#include "attn/Dialect/Attn/IR/AttnOps.h.inc"

#endif // ATTN_DIALECT_ATTN_IR_ATTN_H
