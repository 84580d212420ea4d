//===- Json.cpp - Minimal JSON reader for manifests -----------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Recursive descent with a depth limit, so a hostile manifest cannot overflow
// the stack; every read is bounds-checked.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include <cstdlib>

namespace attnrt::json {

const Value *Value::get(std::string_view key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &kv : object)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

namespace {

class Parser {
public:
  explicit Parser(std::string_view t) : text(t) {}

  bool document(Value *out) {
    if (!value(out, 0))
      return false;
    skipSpace();
    if (pos != text.size())
      return fail("trailing characters after the JSON value");
    return true;
  }
  std::string error;

private:
  std::string_view text;
  size_t pos = 0;

  bool fail(const std::string &msg) {
    if (error.empty())
      error = msg + " at byte " + std::to_string(pos);
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  bool literal(std::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return fail("invalid literal");
    pos += word.size();
    return true;
  }

  bool value(Value *out, int depth) {
    if (depth > 64)
      return fail("nesting deeper than 64");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    if (c == '{')
      return object(out, depth);
    if (c == '[')
      return array(out, depth);
    if (c == '"') {
      out->kind = Value::Kind::String;
      return string(&out->string);
    }
    if (c == 't') {
      out->kind = Value::Kind::Bool;
      out->boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      out->kind = Value::Kind::Bool;
      return literal("false");
    }
    if (c == 'n') {
      out->kind = Value::Kind::Null;
      return literal("null");
    }
    return number(out);
  }

  bool number(Value *out) {
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-')
      ++pos;
    bool digits = false;
    while (pos < text.size() &&
           ((text[pos] >= '0' && text[pos] <= '9') || text[pos] == '.' ||
            text[pos] == 'e' || text[pos] == 'E' || text[pos] == '+' ||
            text[pos] == '-')) {
      digits = true;
      ++pos;
    }
    if (!digits)
      return fail("expected a value");
    std::string s(text.substr(start, pos - start));
    char *end = nullptr;
    out->kind = Value::Kind::Number;
    out->number = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size())
      return fail("malformed number '" + s + "'");
    return true;
  }

  bool string(std::string *out) {
    ++pos; // opening quote
    while (pos < text.size()) {
      char c = text[pos++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos >= text.size())
        break;
      char e = text[pos++];
      switch (e) {
      case '"': case '\\': case '/': out->push_back(e); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        if (pos + 4 > text.size())
          return fail("short \\u escape");
        unsigned cp = 0;
        for (int i = 0; i < 4; ++i) {
          char h = text[pos++];
          cp <<= 4;
          if (h >= '0' && h <= '9') cp |= h - '0';
          else if (h >= 'a' && h <= 'f') cp |= h - 'a' + 10;
          else if (h >= 'A' && h <= 'F') cp |= h - 'A' + 10;
          else return fail("bad hex digit in \\u escape");
        }
        // UTF-8 encode (BMP only).
        if (cp < 0x80) out->push_back(char(cp));
        else if (cp < 0x800) {
          out->push_back(char(0xC0 | (cp >> 6)));
          out->push_back(char(0x80 | (cp & 0x3F)));
        } else {
          out->push_back(char(0xE0 | (cp >> 12)));
          out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
          out->push_back(char(0x80 | (cp & 0x3F)));
        }
        break;
      }
      default:
        return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }

  bool array(Value *out, int depth) {
    out->kind = Value::Kind::Array;
    ++pos;
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      out->array.emplace_back();
      if (!value(&out->array.back(), depth + 1))
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool object(Value *out, int depth) {
    out->kind = Value::Kind::Object;
    ++pos;
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key");
      std::string key;
      if (!string(&key))
        return false;
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected ':'");
      ++pos;
      out->object.emplace_back(std::move(key), Value());
      if (!value(&out->object.back().second, depth + 1))
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }
};

} // namespace

bool parse(std::string_view text, Value *out, std::string *error) {
  Parser p(text);
  *out = Value();
  if (p.document(out))
    return true;
  if (error)
    *error = p.error;
  return false;
}

} // namespace attnrt::json
