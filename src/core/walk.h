// Walking the value tree, with the path rules every tool shares (collect_tensors,
// diff, the torch writer's storage plan):
//   - a dict value:            its key as text (key_text), joined with '.'
//   - a list/tuple/set item:   its index
//   - an opaque object:        "args.N" for the items of a tuple of arguments, "kwargs",
//                              its state (see below), list items by index, dict items
//                              by key
//   - an object's state:       a dict state is the instance __dict__: its items are
//                              reached as attributes at the object's own path, and
//                              nn.Module's "_parameters", "_buffers" and "_modules"
//                              are transparent, so a pickled module's paths equal its
//                              state_dict keys; any other state is reached at "state"
//   - the root:                the empty path
#pragma once

#include <string>
#include <string_view>

#include "tensorseal/value.h"

namespace tensorseal::detail::core {

// Text of a dict key in a path: a str as it is, an int in decimal, anything else as
// repr(key, repr_len).
std::string key_text(const Value& key, std::size_t repr_len = 80);
// base + "." + part, or part for the empty base.
std::string path_join(const std::string& base, std::string_view part);

class Visitor {
 public:
  virtual ~Visitor() = default;
  // A value reached at `path`. Returning true walks into it (containers and objects;
  // leaves have nothing to walk). The walker does not remember nodes: visitors that
  // must see a shared node once (or stop at cycles a hand-built tree may have) return
  // false for nodes they saw.
  virtual bool enter(const Value& v, const std::string& path) = 0;
  // An object's dict state, whose items are reached at the object's path (the dict
  // itself is not entered). Returning false skips them.
  virtual bool enter_state(const Value& state) {
    (void)state;
    return true;
  }
  // False: the visitor ignores `path`; the walker then passes "" everywhere and builds
  // no path (the same values in the same order).
  virtual bool wants_paths() const { return true; }
};

enum class Reach {
  kPaths,       // the values named by paths (above)
  kEverything,  // also dict keys, dict attrs, callables and non-tuple arguments, all
                // reached at their container's path; tuple arguments are entered as
                // a node at "args" before their items
};

// Depth-first in tree order: a container is entered before its items; dict items in
// order, each key (kEverything) before its value, then the attrs; an object's
// callable (kEverything), args, kwargs, state, list items, dict items.
void walk(const Value& root, Visitor& visitor, Reach reach = Reach::kPaths);

}  // namespace tensorseal::detail::core
