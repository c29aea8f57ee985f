// Storage planning for the canonical torch writers (docs/formats/canonical-pt.md).
//
// Tensors are grouped by the storage they view. Each group becomes one output storage
// holding only bytes some tensor reaches:
//   - one distinct view, dense (no overlap, no stride 0): its elements, contiguous,
//     and the tensor is rewritten contiguous at offset 0 (layout is not content);
//   - otherwise (tied views with different offsets/strides, expanded views): the span
//     [lowest, highest) byte any view reaches, with bytes no view reaches zeroed, and
//     the views keep their strides, rebased to the span.
// A slice of a huge tensor therefore never drags (or leaks) the rest of its storage.
// Keys are assigned "0","1",... in first-use order by the writer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorseal/value.h"
#include "util/ptr_map.h"

namespace tensorseal::detail::torch {

struct PlannedStorage {
  DType dtype = DType::kUInt8;
  std::uint64_t nbytes = 0;
  const Tensor* dense_source = nullptr;  // bytes = this tensor's elements in row-major order
  std::shared_ptr<const Storage> whole;  // bytes = all of this storage (bare storages)
  std::vector<std::byte> gathered;       // bytes = this buffer (sparse/overlapping groups)
  std::string key;                       // assigned on first use
  // The storage whose bytes() are exactly this storage's bytes, when there is one: a
  // bare storage written whole, or a dense contiguous tensor covering all of its
  // storage from offset 0. Null otherwise (windows, gathers, strided copies).
  const Storage* exact_source() const {
    if (whole) return whole.get();
    if (dense_source && dense_source->storage && dense_source->storage_offset == 0 && dense_source->is_contiguous() &&
        dense_source->nbytes() == dense_source->storage->size() && nbytes == dense_source->storage->size())
      return dense_source->storage.get();
    return nullptr;
  }
  // Streams the bytes (zero-copy where possible).
  template <typename F>
  void for_each_run(F&& sink) const {
    if (dense_source)
      dense_source->for_each_run(sink);
    else if (whole)
      sink(whole->bytes());
    else if (!gathered.empty())
      sink(std::span<const std::byte>(gathered));
  }
};

struct PlannedView {
  PlannedStorage* storage = nullptr;
  std::int64_t offset = 0;  // elements
  // In elements; empty when `contiguous` (the tensor's row-major strides,
  // Tensor::contiguous_strides, made by whoever needs them: most views are).
  std::vector<std::int64_t> strides;
  bool contiguous = false;
  bool lazy = false;  // a conj/neg view planned as its raw view: the writer records its bits
};

// Whether the views of a storage that are all this view are written as its elements,
// contiguous at offset 0 (PlannedView::contiguous), rather than as the span they reach.
bool written_contiguous(const Tensor& t);

class StoragePlan {
 public:
  // Plans every tensor and bare storage reachable from `root`.
  explicit StoragePlan(const Value& root);
  const PlannedView& view(const Tensor& t) const { return at(views_, &t); }
  PlannedStorage& bare(const Storage& s) { return *at(bare_, &s); }
  // Assigns the next key to `s` on first use; returns its key.
  const std::string& use(PlannedStorage& s);
  // Storages in key order (only those used).
  const std::vector<PlannedStorage*>& used() const { return used_; }

 private:
  template <typename V>
  static const V& at(const util::PtrMap<V>& m, const void* key) {
    const V* v = m.find(key);
    if (v == nullptr) throw std::out_of_range("StoragePlan: a tensor or storage that was not planned");
    return *v;
  }
  // Reserved to its final size before the first element (plan.cc): addresses are stable.
  // (Not a std::deque: clang exports its iterator operators from the shared library.)
  std::vector<PlannedStorage> storages_;
  std::vector<std::unique_ptr<Tensor>> raw_views_;  // of conj/neg views (dense sources may point here)
  util::PtrMap<PlannedView> views_;
  util::PtrMap<PlannedStorage*> bare_;
  std::vector<PlannedStorage*> used_;
};

}  // namespace tensorseal::detail::torch
