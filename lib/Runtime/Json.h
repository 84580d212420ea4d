//===- Json.h - Minimal JSON reader for manifests ---------------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// A small dependency-free JSON reader (RFC 8259 subset: no \u surrogate pairs
// beyond the BMP) used only to parse kernel manifests. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_RUNTIME_JSON_H
#define ATTN_LIB_RUNTIME_JSON_H

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attnrt::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object; ///< in document order

  /// Member of an object by key, or nullptr.
  const Value *get(std::string_view key) const;
};

/// Parses `text` into `out`; on error returns false and sets `error` to a
/// message with the byte offset.
bool parse(std::string_view text, Value *out, std::string *error);

} // namespace attnrt::json

#endif // ATTN_LIB_RUNTIME_JSON_H
