#include "core/walk.h"

namespace tensorseal::detail::core {

std::string key_text(const Value& k, std::size_t repr_len) {
  switch (k.kind()) {
    case Value::Kind::kStr:
      return std::string(k.as_str());
    case Value::Kind::kInt:
      return std::to_string(k.as_int());
    default:
      return repr(k, repr_len);
  }
}

std::string path_join(const std::string& base, std::string_view part) {
  if (base.empty()) return std::string(part);
  std::string out;
  out.reserve(base.size() + 1 + part.size());
  out += base;
  out += '.';
  out += part;
  return out;
}

namespace {

bool transparent_module_attr(std::string_view k) { return k == "_parameters" || k == "_buffers" || k == "_modules"; }

class Walker {
 public:
  Walker(Visitor& visitor, Reach reach)
      : visitor_(visitor), everything_(reach == Reach::kEverything), paths_(visitor.wants_paths()) {}

  void value(const Value& v, const std::string& path) {
    using K = Value::Kind;
    if (!visitor_.enter(v, path)) return;
    switch (v.kind()) {
      case K::kList:
      case K::kTuple:
        sequence(v.items(), path);
        return;
      case K::kSet:
        sequence(v.as_set().items, path);
        return;
      case K::kDict:
        dict(v.as_dict(), path, false);
        return;
      case K::kObject:
        object(v.as_object(), path);
        return;
      default:
        return;
    }
  }

 private:
  void sequence(const std::vector<Value>& items, const std::string& path, std::string_view prefix = {}) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!paths_) {
        value(items[i], path);
        continue;
      }
      std::string part(prefix);
      part += std::to_string(i);
      value(items[i], path_join(path, part));
    }
  }

  void items(const std::vector<std::pair<Value, Value>>& kv, const std::string& path, bool module_state) {
    for (const auto& [k, v] : kv) {
      if (everything_) value(k, path);
      if (!paths_) {
        value(v, path);
        continue;
      }
      std::string kt = key_text(k);
      value(v, module_state && transparent_module_attr(kt) ? path : path_join(path, kt));
    }
  }

  // path_join, or "" when the visitor takes no paths.
  std::string join(const std::string& path, std::string_view part) const {
    return paths_ ? path_join(path, part) : std::string();
  }

  void dict(const Dict& d, const std::string& path, bool module_state) {
    items(d.items, path, module_state);
    if (everything_ && d.attrs)
      for (const auto& [k, v] : d.attrs->items) {
        value(k, path);
        value(v, path);
      }
  }

  void object(const Object& o, const std::string& path) {
    using K = Value::Kind;
    if (everything_ && o.callable) value(*o.callable, path);
    if (o.args) {
      if (o.args->kind() != K::kTuple) {
        if (everything_) value(*o.args, path);
      } else if (!everything_ || visitor_.enter(*o.args, join(path, "args"))) {
        sequence(o.args->items(), path, "args.");
      }
    }
    if (o.kwargs) value(*o.kwargs, join(path, "kwargs"));
    if (o.state) {
      if (o.state->kind() == K::kDict) {
        if (visitor_.enter_state(*o.state)) dict(o.state->as_dict(), path, true);
      } else {
        value(*o.state, join(path, "state"));
      }
    }
    sequence(o.list_items, path);
    items(o.dict_items, path, false);
  }

  Visitor& visitor_;
  const bool everything_;
  const bool paths_;
};

}  // namespace

void walk(const Value& root, Visitor& visitor, Reach reach) {
  Walker w(visitor, reach);
  w.value(root, "");
}

}  // namespace tensorseal::detail::core
