//===- BufferizableOpInterfaceImpl.h - bufferizing the attn ops -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// One-shot bufferization of attn.attention, attn.merge_states and
// attn.append_kv: the value form becomes the memref destination form
// (AttnOps.td). Registered by attn::registerAllDialects.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_BUFFERIZABLEOPINTERFACEIMPL_H
#define ATTN_DIALECT_ATTN_IR_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::attn {
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_IR_BUFFERIZABLEOPINTERFACEIMPL_H
