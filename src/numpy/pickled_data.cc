// Which .npy images numpy.load(allow_pickle=True) unpickles (numpy/lib/_format_impl.py
// read_array: `if dtype.hasobject: pickle.load(fp)` from the first data byte). numpy
// reads the header with ast.literal_eval and builds the dtype with descr_to_dtype, so an
// object dtype has many spellings: 'O', '|O8', 'object', 'object_', 'i4,O', '(2,)O', a
// struct or subarray holding one, escapes inside the string, version-3 UTF-8 headers.
// Instead of enumerating them, this proves the opposite: the data is not unpickled only
// when the header is a literal read here exactly as literal_eval reads it and either
// numpy refuses it before reading data, or its descr can hold no object. Everything
// else is treated as a pickle (scan then parses the data as one, tolerating non-pickles).
//
//   literal = str | int | 'True' | 'False' | 'None' | tuple | list | dict
//   str     = ['u'|'U'] ("'" [^'\\\n]* "'" | '"' [^"\\\n]* '"')     (no escapes, no prefixes
//                                                                   but u: else unproven)
//   int     = ['-'] digits ['L' | 'l']     (Python 2 longs: numpy filters them for 1.0/2.0)
//   tuple   = '(' [literal (',' literal)* [',']] ')'   list = '[' ... ']'
//   dict    = '{' [literal ':' literal (',' ...)* [',']] '}'  (a repeated key: unproven)
#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "numpy/constants.h"
#include "numpy/npy.h"
#include "tensorseal/error.h"
#include "util/endian.h"

namespace tensorseal::detail::numpy {
namespace {

struct Lit;
using LitList = std::vector<Lit>;
struct Lit {
  enum class Kind { kStr, kInt, kBool, kNone, kTuple, kList, kDict } kind = Kind::kNone;
  std::string str;
  LitList items;  // tuple, list; dict: key, value, key, value...
};

// A strict reader of the literal subset above; nullopt for anything outside it (the
// header is then unproven, never refused: numpy may still read it).
class LiteralReader {
 public:
  explicit LiteralReader(std::string_view s) : s_(s) {}

  std::optional<Lit> whole() {
    auto v = value(0);
    ws();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  static constexpr int kMaxDepth = 32;  // descr nesting numpy writes is 2-3 deep

  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    const char after = i_ + w.size() < s_.size() ? s_[i_ + w.size()] : '\0';
    if (std::isalnum(static_cast<unsigned char>(after)) || after == '_') return false;
    i_ += w.size();
    return true;
  }
  std::optional<Lit> value(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    ws();
    Lit v;
    const char c = peek();
    if (c == 'u' || c == 'U' || c == '\'' || c == '"') {
      if (c == 'u' || c == 'U') ++i_;
      const char q = peek();
      if (q != '\'' && q != '"') return std::nullopt;
      const std::size_t start = ++i_;
      while (i_ < s_.size() && s_[i_] != q) {
        if (s_[i_] == '\\' || s_[i_] == '\n' || s_[i_] == '\r') return std::nullopt;
        ++i_;
      }
      if (i_ >= s_.size()) return std::nullopt;
      v.kind = Lit::Kind::kStr;
      v.str.assign(s_.substr(start, i_ - start));
      ++i_;
      ws();
      if (peek() == '\'' || peek() == '"') return std::nullopt;  // implicit concatenation
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      if (c == '-') ++i_;
      const std::size_t start = i_;
      while (peek() >= '0' && peek() <= '9') ++i_;
      if (i_ == start) return std::nullopt;
      if (peek() == 'L' || peek() == 'l') ++i_;
      if (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '.' || peek() == '_') return std::nullopt;
      v.kind = Lit::Kind::kInt;
      return v;
    }
    if (word("True") || word("False")) {
      v.kind = Lit::Kind::kBool;
      return v;
    }
    if (word("None")) return v;
    if (c == '(' || c == '[' || c == '{') {
      const char close = c == '(' ? ')' : c == '[' ? ']' : '}';
      v.kind = c == '(' ? Lit::Kind::kTuple : c == '[' ? Lit::Kind::kList : Lit::Kind::kDict;
      ++i_;
      bool comma = false;
      for (;;) {
        ws();
        if (peek() == close) break;
        if (!v.items.empty() && !comma) return std::nullopt;
        auto item = value(depth + 1);
        if (!item) return std::nullopt;
        v.items.push_back(std::move(*item));
        ws();
        if (v.kind == Lit::Kind::kDict) {
          if (peek() != ':') return std::nullopt;
          ++i_;
          auto val = value(depth + 1);
          if (!val) return std::nullopt;
          v.items.push_back(std::move(*val));
          ws();
        }
        comma = peek() == ',';
        if (comma) ++i_;
      }
      ++i_;
      // "(x)" is x, not a tuple: only a bare parenthesised value has no comma.
      if (v.kind == Lit::Kind::kTuple && v.items.size() == 1 && !comma) return std::move(v.items[0]);
      return v;
    }
    return std::nullopt;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

// True when descr_to_dtype(d) cannot give a dtype that holds objects (or fails).
bool object_free(const Lit& d) {
  switch (d.kind) {
    case Lit::Kind::kStr:
      // Every object spelling contains 'O' or "object" ('O8', 'i4,O', '(2,)O', 'object_').
      return d.str.find('O') == std::string::npos && d.str.find("object") == std::string::npos;
    case Lit::Kind::kTuple:  // (descr, shape): a subarray
      return !d.items.empty() && object_free(d.items[0]);
    case Lit::Kind::kList:  // [(name, descr[, shape]), ...]: a struct
      for (const Lit& f : d.items) {
        if (f.kind != Lit::Kind::kTuple || (f.items.size() != 2 && f.items.size() != 3)) return false;
        if (!object_free(f.items[1])) return false;
      }
      return true;
    default:
      return false;
  }
}

// True when numpy provably does not unpickle the data of an image with this header text.
bool proven_not_pickled(std::string_view text) {
  const auto lit = LiteralReader(text).whole();
  if (!lit) return false;
  if (lit->kind != Lit::Kind::kDict) return true;  // numpy: "Header is not a dictionary"
  std::map<std::string, const Lit*> keys;
  for (std::size_t i = 0; i + 1 < lit->items.size(); i += 2) {
    const Lit& k = lit->items[i];
    if (k.kind != Lit::Kind::kStr) return true;                         // not the expected keys: numpy refuses
    if (!keys.emplace(k.str, &lit->items[i + 1]).second) return false;  // literal_eval keeps the last
  }
  const auto descr = keys.find("descr");
  if (keys.size() != 3 || descr == keys.end() || !keys.count("fortran_order") || !keys.count("shape")) return true;
  const Lit& shape = *keys["shape"];
  if (shape.kind != Lit::Kind::kTuple) return true;
  for (const Lit& x : shape.items)
    if (x.kind != Lit::Kind::kInt) return true;
  if (keys["fortran_order"]->kind != Lit::Kind::kBool) return true;
  return object_free(*descr->second);
}

}  // namespace

std::optional<std::uint64_t> pickled_data(std::span<const std::byte> head) {
  if (head.size() < kMagic.size() || std::memcmp(head.data(), kMagic.data(), kMagic.size()) != 0)
    throw Error(rules::kBadMagic, "not a .npy file (no \\x93NUMPY magic)", {}, 0);
  if (head.size() < kPrefixSizeV1) throw Error(rules::kTruncatedHeader, "file ends inside the header length", {}, 6);
  const int major = static_cast<int>(head[6]), minor = static_cast<int>(head[7]);
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    throw Error(rules::kBadVersion, fmt::format("format version {}.{} (numpy reads 1.0, 2.0, 3.0)", major, minor), {},
                6);
  const std::uint64_t prefix = major == 1 ? kPrefixSizeV1 : kPrefixSizeV2;
  if (head.size() < prefix) throw Error(rules::kTruncatedHeader, "file ends inside the header length", {}, 8);
  const std::uint64_t hlen =
      major == 1 ? util::load_le<std::uint16_t>(head.data() + 8) : util::load_le<std::uint32_t>(head.data() + 8);
  const std::uint64_t data = prefix + hlen;
  if (hlen > kMaxHeaderSize || data > head.size()) return data;  // not provable from here
  const std::string_view text(reinterpret_cast<const char*>(head.data() + prefix), hlen);
  if (proven_not_pickled(text)) return std::nullopt;
  return data;
}

}  // namespace tensorseal::detail::numpy
