//===- Version.h - the attn version, in one place -------------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The version the compiler reports (attnCompilerVersion) and writes into
// every manifest's "compiler_version"; bump it whenever generated code can
// change for the same input (it is part of every kernel-cache check,
// python/attn/compiler.py). python/attn/__init__.py's __version__ follows it.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_VERSION_H
#define ATTN_VERSION_H

#define ATTN_VERSION_STRING "0.1.6"

#endif // ATTN_VERSION_H
