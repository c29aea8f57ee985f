// Flattening a value tree into paths for `diff`: tensors and non-tensor leaves.
//
// Paths are those of core/walk.h, as for collect_tensors. Unlike collect_tensors, a
// tensor reachable under two paths (tied weights) is listed under both, because the
// content hash encodes it twice; shared containers (an object's dict state included)
// are still walked once, which also stops cycles.
#pragma once

#include <string>
#include <vector>

#include "tensorseal/value.h"

namespace tensorseal::detail::tools {

struct Leaf {
  std::string path;
  std::string key;      // exact comparison key (kind tag + full value)
  std::string display;  // short rendering for reports
};

struct Flat {
  std::vector<TensorRef> tensors;
  // Non-tensor leaves plus one entry per container recording its kind ("<list>",
  // "<dict>", "<object torch._utils._rebuild_tensor_v2>", ...), in tree order.
  std::vector<Leaf> leaves;
};

Flat flatten(const Value& root);

// "(root)" for the empty path, else the path.
inline std::string path_text(const std::string& p) { return p.empty() ? "(root)" : p; }

}  // namespace tensorseal::detail::tools
