#include "tools/diff_walk.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/walk.h"
#include "tensorseal/hash.h"

namespace tensorseal::detail::tools {
namespace {

std::string float_key(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, 8);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(bits));
  return buf;
}

std::string float_display(double d) {
  if (std::isnan(d)) return "nan (0x" + float_key(d) + ")";
  return repr(Value(d));
}

class Flattener : public detail::core::Visitor {
 public:
  Flat out;

  bool enter(const Value& v, const std::string& path) override {
    using K = Value::Kind;
    switch (v.kind()) {
      case K::kTensor:
        out.tensors.push_back({path, v.as_tensor()});
        return false;
      case K::kNone:
        leaf(path, "N", "None");
        return false;
      case K::kBool:
        leaf(path, v.as_bool() ? "B1" : "B0", v.as_bool() ? "True" : "False");
        return false;
      case K::kInt:
        leaf(path, "I" + std::to_string(v.as_int()), std::to_string(v.as_int()));
        return false;
      case K::kBigInt:
        leaf(path, "I" + v.as_bigint().to_decimal(), v.as_bigint().to_decimal());
        return false;
      case K::kFloat:
        leaf(path, "F" + float_key(v.as_float()), float_display(v.as_float()));
        return false;
      case K::kComplex: {
        const Complex c = v.as_complex();
        const bool nan = std::isnan(c.real) || std::isnan(c.imag);
        leaf(path, "C" + float_key(c.real) + float_key(c.imag),
             nan ? repr(v) + " (0x" + float_key(c.real) + ", 0x" + float_key(c.imag) + ")" : repr(v));
        return false;
      }
      case K::kStr:
        leaf(path, "S" + std::string(v.as_str()), repr(v));
        return false;
      case K::kBytes:
        leaf(path, "Y" + std::string(v.as_bytes()), repr(v));
        return false;
      case K::kGlobal: {
        const Global& g = v.as_global();
        leaf(path, "G" + g.module + "\n" + g.name, g.module + "." + g.name);
        return false;
      }
      case K::kStorage: {
        const Storage& s = *v.as_storage();
        const std::string sha = sha256_hex(s.bytes());
        const std::string d = fmt::format("storage({}, {} bytes)", name(s.dtype), s.size());
        leaf(path, "R" + std::string(name(s.dtype)) + sha, d);
        return false;
      }
      case K::kRef:
        leaf(path, "P" + repr(v), repr(v) + " (recursive reference)");
        return false;
      default:
        break;
    }
    // Containers: entered once each (shared nodes, cycles).
    if (!seen_.insert(v.node()).second) return false;
    switch (v.kind()) {
      case K::kList:
        leaf(path, "<list>", "<list>");
        break;
      case K::kTuple:
        leaf(path, "<tuple>", "<tuple>");
        break;
      case K::kSet:
        leaf(path, "<set>", "<set>");
        break;
      // dict, OrderedDict and Counter alike, as the content hash treats them.
      case K::kDict:
        leaf(path, "<dict>", "<dict>");
        break;
      case K::kObject: {
        const Object& o = v.as_object();
        const std::string callable = "<object " + (o.callable ? repr(*o.callable, 120) : std::string("?")) + ">";
        leaf(path, callable, callable);
        break;
      }
      default:
        break;
    }
    return true;
  }

  bool enter_state(const Value& state) override { return seen_.insert(state.node()).second; }

 private:
  void leaf(const std::string& path, std::string key, std::string display) {
    out.leaves.push_back({path, std::move(key), std::move(display)});
  }

  std::unordered_set<const void*> seen_;
};

}  // namespace

Flat flatten(const Value& root) {
  Flattener f;
  detail::core::walk(root, f);
  return std::move(f.out);
}

}  // namespace tensorseal::detail::tools
