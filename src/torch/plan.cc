#include "torch/plan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "core/walk.h"
#include "tensorseal/error.h"
#include "torch/constants.h"
#include "util/checked.h"

namespace tensorseal::detail::torch {
namespace {

bool dense(const Tensor& t) {
  // No stride-0 and no overlap: the elements can be laid out contiguously without
  // growing. Sort dims by stride and check each stride covers the dims inside it.
  constexpr std::size_t kInline = 8;  // dims kept on the stack (no allocation per tensor)
  std::pair<std::int64_t, std::int64_t> inline_dims[kInline];
  std::vector<std::pair<std::int64_t, std::int64_t>> more;
  std::pair<std::int64_t, std::int64_t>* dims = inline_dims;  // (stride, size)
  if (t.shape.size() > kInline) {
    more.resize(t.shape.size());
    dims = more.data();
  }
  std::size_t n = 0;
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] > 1) dims[n++] = {t.strides[i], t.shape[i]};
  std::sort(dims, dims + n);
  std::int64_t need = 1;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [stride, size] = dims[i];
    if (stride < need) return false;
    const auto next = util::smul(stride, size);
    // Past int64 only in a tensor without elements (validate bounds the others): kept
    // as its own view.
    if (!next) return false;
    need = *next;
  }
  return true;
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.strides == b.strides && a.storage_offset == b.storage_offset;
}

// Every Storage value (outside tensors) and every tensor reachable from root, also
// where collect_tensors does not look (dict keys, OrderedDict attributes, callables)
// but the writer does: every tensor the writer meets must have a planned view. Each
// node once, in walk order.
class StorageCollector : public core::Visitor {
 public:
  std::vector<std::shared_ptr<const Storage>> storages;
  std::vector<const Tensor*> tensors;

  bool enter(const Value& v, const std::string&) override { return first_time(v); }
  bool enter_state(const Value& state) override { return first_time(state); }
  bool wants_paths() const override { return false; }

 private:
  bool first_time(const Value& v) {
    using K = Value::Kind;
    const void* node = v.node();
    if (node && v.kind() != K::kStr && v.kind() != K::kBytes && !seen_.insert(node)) return false;
    if (v.kind() == K::kStorage) storages.push_back(v.as_storage());
    if (v.kind() == K::kTensor) tensors.push_back(v.as_tensor().get());
    return true;
  }
  util::PtrSet seen_;
};

// The tensors in collect_tensors' order (each node once, the paths' walk), without
// making their paths.
class TensorOrder : public core::Visitor {
 public:
  std::vector<const Tensor*> tensors;

  bool enter(const Value& v, const std::string&) override {
    const void* node = v.node();
    if (node != nullptr && !v.is(Value::Kind::kStr) && !v.is(Value::Kind::kBytes) && !seen_.insert(node)) return false;
    if (v.is(Value::Kind::kTensor)) tensors.push_back(v.as_tensor().get());
    return true;
  }
  bool wants_paths() const override { return false; }

 private:
  util::PtrSet seen_;
};

}  // namespace

StoragePlan::StoragePlan(const Value& root) {
  // Group tensors by the storage they view, in tree order.
  std::vector<const Storage*> order;
  util::PtrMap<std::vector<const Tensor*>> groups;
  StorageCollector reached;
  core::walk(root, reached, core::Reach::kEverything);
  const auto& bare = reached.storages;
  const auto& anywhere = reached.tensors;
  // collect_tensors' order first (it names the tensors), then any it does not reach.
  TensorOrder named;
  core::walk(root, named, core::Reach::kPaths);
  std::vector<const Tensor*> tensors;
  tensors.reserve(anywhere.size());
  util::PtrSet listed;
  listed.reserve(anywhere.size());
  for (const Tensor* t : named.tensors)
    if (listed.insert(t)) tensors.push_back(t);
  for (const Tensor* t : anywhere)
    if (listed.insert(t)) tensors.push_back(t);
  // A quantized tensor's per-channel scales and zero points are tensors the writer
  // emits too (emit.cc), though they are not values of the tree.
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (const auto& q = tensors[i]->quantization; q && q->per_channel())
      for (const Tensor* p : {q->scales.get(), q->zero_points.get()})
        if (listed.insert(p)) tensors.push_back(p);
  // A conj/neg view is planned as its raw view, so it shares its base's storage as in
  // torch (the writer records the bits in the metadata argument).
  std::map<const Tensor*, const Tensor*> lazy_of;  // raw view -> its conj/neg view
  groups.reserve(tensors.size());
  views_.reserve(tensors.size());
  for (const Tensor* t : tensors) {
    t->validate();
    if (t->numpy != NumpyType::kNone) continue;  // numpy objects carry their bytes inline (emit.cc)
    const Tensor* member = t;
    if (t->lazy) {
      raw_views_.push_back(std::make_unique<Tensor>(raw_view(*t)));
      member = raw_views_.back().get();
      lazy_of.emplace(member, t);
    }
    auto& g = *groups.emplace(member->storage.get(), {}).first;
    if (g.empty()) order.push_back(member->storage.get());
    g.push_back(member);
  }
  // torch cannot keep a storage viewed as two dtypes (z and z.conj().imag): such a
  // conj/neg view is planned by its values instead, over a storage of its own.
  for (std::size_t i = 0, n = order.size(); i < n && !lazy_of.empty(); ++i) {
    auto& g = *groups.find(order[i]);
    const auto lead_it = std::find_if(g.begin(), g.end(), [&](const Tensor* m) { return !lazy_of.count(m); });
    const DType lead = (lead_it == g.end() ? g.front() : *lead_it)->dtype;
    std::vector<const Tensor*> kept;
    std::vector<const Tensor*> moved;
    for (const Tensor* m : g) {
      const auto it = lazy_of.find(m);
      if (m->dtype == lead || it == lazy_of.end()) {
        kept.push_back(m);
        continue;
      }
      moved.push_back(it->second);
      lazy_of.erase(it);
    }
    // (g is not touched after an emplace: that may move the table's entries.)
    g = std::move(kept);
    for (const Tensor* view : moved) {
      order.push_back(view->storage.get());
      groups.emplace(view->storage.get(), {}).first->push_back(view);
    }
  }
  // Every storage is planned below: reserved once, so the pointers into storages_
  // (views_, bare_, used_) stay valid.
  storages_.reserve(order.size() + bare.size());
  for (const Storage* s : order) {
    const auto& g = *groups.find(s);
    for (const Tensor* t : g)
      if (t->dtype != g.front()->dtype)
        throw Error(torch::rules::kCannotWrite, "a storage is viewed as both " + std::string(name(t->dtype)) + " and " +
                                                    std::string(name(g.front()->dtype)) + "; not supported");
    PlannedStorage* ps = &storages_.emplace_back();
    ps->dtype = g.front()->dtype;
    const std::uint64_t item = itemsize(ps->dtype);
    const bool one_view = std::all_of(g.begin(), g.end(), [&](const Tensor* t) { return same_view(*t, *g.front()); });
    if (one_view && written_contiguous(*g.front())) {
      const Tensor& t = *g.front();
      ps->dense_source = &t;
      ps->nbytes = t.nbytes();
      for (const Tensor* v : g) views_.assign(v, PlannedView{ps, 0, {}, true});
    } else {
      // The span any view reaches; unreached bytes are zero.
      std::uint64_t lo = UINT64_MAX, hi = 0;
      for (const Tensor* t : g) {
        auto [b, e] = t->storage_extent();
        if (b == e) continue;
        lo = std::min(lo, b);
        hi = std::max(hi, e);
      }
      if (lo == UINT64_MAX) lo = hi = 0;
      ps->nbytes = hi - lo;
      ps->gathered.assign(ps->nbytes, std::byte{0});
      const std::byte* base = s->bytes().data();
      for (const Tensor* t : g) {
        t->for_each_run([&](std::span<const std::byte> run) {
          std::memcpy(ps->gathered.data() + (run.data() - base - lo), run.data(), run.size());
        });
        views_.assign(t, PlannedView{ps, t->storage_offset - static_cast<std::int64_t>(lo / item), t->strides});
      }
    }
  }
  for (const auto& [raw, view] : lazy_of) {
    PlannedView v = at(views_, raw);
    v.lazy = true;
    views_.assign(view, std::move(v));
  }
  for (const auto& s : bare) {
    if (bare_.find(s.get()) != nullptr) continue;
    PlannedStorage* ps = &storages_.emplace_back();
    ps->dtype = s->dtype;
    ps->nbytes = s->size();
    ps->whole = s;
    bare_.assign(s.get(), ps);
  }
}

bool written_contiguous(const Tensor& t) { return itemsize(t.dtype) == 0 || dense(t); }

const std::string& StoragePlan::use(PlannedStorage& s) {
  if (s.key.empty()) {
    s.key = std::to_string(used_.size());
    used_.push_back(&s);
  }
  return s.key;
}

}  // namespace tensorseal::detail::torch
