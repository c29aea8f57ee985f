// Plain pickle streams: what pickle.dumps(tensor | storage | state_dict | module)
// writes. Storages inside are torch.storage._load_from_bytes(<bytes>) whose payload is
// a complete torch file (legacy or zip); those are parsed as nested files, never run.
#include <fmt/format.h>

#include "torch/constants.h"
#include "torch/format.h"
#include "torch/rebuild.h"

namespace tensorseal::detail::torch {

Checkpoint read_pickle_file(const io::Input& in) {
  Checkpoint c;
  c.format = Format::kPickle;
  std::uint64_t end = 0;
  c.root = torch::unpickle(in, in.bytes(), 0, "pickle", {}, c, &end);
  if (end != in.size())
    throw Error(torch::rules::kPickleTrailing, fmt::format("{} bytes follow the pickle's STOP opcode", in.size() - end),
                in.name, end);
  return c;
}

}  // namespace tensorseal::detail::torch
