#include "dcp/tree.h"

#include <algorithm>

#include "hash/content_hash.h"

namespace tensorseal::detail::dcp {

const Value* find_element(const Value& root, const Entry& e) {
  const Value* cur = &root;
  const std::vector<Value> fqn{Value::str(e.fqn)};
  for (const Value& key : e.path.empty() ? fqn : e.path) {
    if (cur->is(Value::Kind::kDict)) {
      cur = cur->as_dict().find(key);
    } else if (cur->is(Value::Kind::kList) && key.is(Value::Kind::kInt) && key.as_int() >= 0 &&
               static_cast<std::uint64_t>(key.as_int()) < cur->items().size()) {
      cur = &cur->items()[static_cast<std::size_t>(key.as_int())];
    } else {
      return nullptr;
    }
    if (cur == nullptr) return nullptr;
  }
  return cur;
}

BlockRuns block_runs(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& offsets,
                     const std::vector<std::int64_t>& sizes, std::uint64_t item, std::uint64_t nbytes) {
  BlockRuns b{shape, offsets, sizes, item};
  const std::size_t n = shape.size();
  if (n == 0 || item == 0) {
    b.count = 1;
    b.bytes = nbytes;
    return b;
  }
  for (std::size_t d = 0; d < n; ++d)
    if (sizes[d] != shape[d]) b.k = d;
  std::uint64_t inner = item;
  for (std::size_t d = b.k; d < n; ++d) inner *= static_cast<std::uint64_t>(sizes[d]);
  b.bytes = inner;
  b.count = 1;
  for (std::size_t d = 0; d < b.k; ++d) b.count *= static_cast<std::uint64_t>(sizes[d]);
  if (inner == 0) b.count = 0;
  return b;
}

std::uint64_t BlockRuns::start(std::uint64_t r) const {
  const std::size_t n = shape.size();
  if (n == 0 || item == 0) return 0;
  std::vector<std::int64_t> idx(k, 0);
  for (std::size_t d = k; d-- > 0;) {
    idx[d] = static_cast<std::int64_t>(r % static_cast<std::uint64_t>(sizes[d]));
    r /= static_cast<std::uint64_t>(sizes[d]);
  }
  std::uint64_t elem = 0;
  for (std::size_t d = 0; d < n; ++d)
    elem = elem * static_cast<std::uint64_t>(shape[d]) + static_cast<std::uint64_t>(d < k    ? offsets[d] + idx[d]
                                                                                    : d == k ? offsets[d]
                                                                                             : 0);
  return elem * item;
}

void chunks_inside(const BlockRuns& runs, std::uint64_t nbytes,
                   const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& f) {
  constexpr std::uint64_t M = hash::kLeafChunk;
  auto in_run = [&](std::uint64_t r) {
    const std::uint64_t s = runs.start(r), e = s + runs.bytes;
    for (std::uint64_t c = (s + M - 1) / M; c * M < e; ++c) {
      const std::uint64_t len = std::min(M, nbytes - c * M);
      if (c * M + len > e) break;
      f(c, r * runs.bytes + (c * M - s), len);
    }
  };
  if (runs.count == 0) return;
  // A run shorter than a chunk can hold only the tensor's short last chunk: the last run.
  if (runs.bytes < M) {
    if (nbytes % M != 0) in_run(runs.count - 1);
    return;
  }
  for (std::uint64_t r = 0; r < runs.count; ++r) in_run(r);
}

}  // namespace tensorseal::detail::dcp
