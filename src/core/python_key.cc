#include "core/python_key.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tensorseal::detail::core {
namespace {

// NaN keys get encodings no other key can have.
std::atomic<std::uint64_t> nan_keys{0};

// A tuple's or frozenset's item: short encodings inline (":len:enc"), longer ones by
// their SHA-256 ("#" + 32 bytes), so a key's size stays linear in its items however
// deep values nest.
constexpr std::size_t kInlineItem = 64;
void append_item(std::string& out, const std::string& item) {
  if (item.size() > kInlineItem) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(item.data(), item.size(), md, &len, EVP_sha256(), nullptr);
    out += '#';
    out.append(reinterpret_cast<const char*>(md), len);
    return;
  }
  out += ':';
  out += std::to_string(item.size());
  out += ':';
  out += item;
}

// Encodings of the tuples and frozensets met during one python_key call, by node: a
// value shared many times (a memo DAG of nested frozensets) is encoded once, so the
// work is linear in distinct nodes, not in the expanded tree.
using Memo = std::unordered_map<const void*, std::optional<std::string>>;

bool key_of(const Value& v, std::string& out, Memo& memo);

bool container_key(const Value& v, std::string& out, Memo& memo) {
  if (auto it = memo.find(v.node()); it != memo.end()) {
    if (!it->second) return false;
    out += *it->second;
    return true;
  }
  std::string enc;
  bool ok = true;
  if (v.kind() == Value::Kind::kTuple) {
    enc += 't';
    enc += std::to_string(v.items().size());
    std::string item;
    for (const Value& x : v.items()) {
      item.clear();
      if (!(ok = key_of(x, item, memo))) break;
      append_item(enc, item);
    }
  } else {
    std::vector<std::string> parts;
    for (const Value& x : v.as_set().items) {
      parts.emplace_back();
      if (!(ok = key_of(x, parts.back(), memo))) break;
    }
    if (ok) {
      std::sort(parts.begin(), parts.end());
      enc += 'z';
      enc += std::to_string(parts.size());
      for (const auto& p : parts) append_item(enc, p);
    }
  }
  memo.emplace(v.node(), ok ? std::optional<std::string>(enc) : std::nullopt);
  if (ok) out += enc;
  return ok;
}

bool key_of(const Value& v, std::string& out, Memo& memo) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kNone:
      out += 'N';
      return true;
    case K::kBool:
      out += v.as_bool() ? "i1" : "i0";
      return true;
    case K::kInt:
      out += 'i';
      out += std::to_string(v.as_int());
      return true;
    case K::kBigInt:
      out += 'I';
      out += v.as_bigint().le_bytes;
      return true;
    case K::kComplex: {
      // complex(x, 0) == x in Python (either sign of zero): the key of the float x.
      const Complex c = v.as_complex();
      if (c.imag == 0.0) return python_key(Value(c.real), out);
      if (c.real != c.real || c.imag != c.imag) {
        out += 'n';
        out += std::to_string(nan_keys.fetch_add(1, std::memory_order_relaxed));
        return true;
      }
      // Parts equal as floats give one key (-0.0 == 0.0).
      const double re = c.real == 0.0 ? 0.0 : c.real, im = c.imag;
      std::uint64_t bits[2];
      std::memcpy(&bits[0], &re, sizeof re);
      std::memcpy(&bits[1], &im, sizeof im);
      out += 'c';
      out += std::to_string(bits[0]);
      out += ',';
      out += std::to_string(bits[1]);
      return true;
    }
    case K::kFloat: {
      const double d = v.as_float();
      if (d != d) {
        out += 'n';
        out += std::to_string(nan_keys.fetch_add(1, std::memory_order_relaxed));
        return true;
      }
      // Integral floats in int64 range equal the int of the same value.
      if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d))) {
        out += 'i';
        out += std::to_string(static_cast<std::int64_t>(d));
        return true;
      }
      std::uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      out += 'f';
      out += std::to_string(bits);
      return true;
    }
    case K::kStr:
      out += 's';
      out += v.as_str();
      return true;
    case K::kBytes:
      if (v.is_bytearray()) return false;
      out += 'b';
      out += v.as_bytes();
      return true;
    case K::kTuple:
      return container_key(v, out, memo);
    case K::kSet:
      if (!v.as_set().frozen) return false;
      return container_key(v, out, memo);
    case K::kGlobal:
      out += 'g';
      out += v.as_global().module;
      out += '\0';
      out += v.as_global().name;
      return true;
    case K::kObject:
    case K::kTensor:
    case K::kStorage: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "o%p", v.node());
      out += buf;
      return true;
    }
    case K::kList:
    case K::kDict:
      return false;
    case K::kRef: {  // the node it refers to (a Ref's node() is its target's)
      const Value t = v.ref_target();
      return !t.is_none() && key_of(t, out, memo);
    }
  }
  return false;
}

}  // namespace

bool python_key(const Value& v, std::string& out) {
  Memo memo;
  return key_of(v, out, memo);
}

}  // namespace tensorseal::detail::core
