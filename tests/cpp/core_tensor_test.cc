// Tensor: validate, for_each_run, contiguous_bytes, storage_extent, is_contiguous,
// lazy_view (conj/neg views); core::check_expansion (Limits::max_expanded_bytes).
// for_each_run is checked against a naive element-by-element gather on many views
// (permuted, sliced, stride-0, size-1 and empty dimensions).
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "core/expansion.h"
#include "test_util.h"
#include "util/checked.h"

namespace tensorseal {
namespace {

std::shared_ptr<const Storage> iota_storage(std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>(i * 7 + 1);
  return Storage::owned(std::move(b));
}

Tensor view(DType d, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, std::int64_t offset,
            std::shared_ptr<const Storage> s) {
  Tensor t;
  t.dtype = d;
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  t.storage_offset = offset;
  t.storage = std::move(s);
  return t;
}

std::string rule(const Tensor& t) {
  return testing::rule_of([&] { t.validate(); });
}

// ---- validate ---------------------------------------------------------------------------

TEST(CoreTensor, ValidateAcceptsOrdinaryViews) {
  auto s = iota_storage(48);
  EXPECT_EQ(rule(view(DType::kFloat32, {3, 4}, {4, 1}, 0, s)), "");
  EXPECT_EQ(rule(view(DType::kFloat32, {4, 3}, {1, 4}, 0, s)), "");  // transposed
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {1}, 10, s)), "");       // last two elements
  EXPECT_EQ(rule(view(DType::kFloat32, {}, {}, 11, s)), "");         // 0-d, last element
  EXPECT_EQ(rule(view(DType::kFloat32, {1000}, {0}, 0, s)), "");     // stride 0 (expand)
  EXPECT_EQ(rule(view(DType::kFloat32, {0, 5}, {5, 1}, 0, s)), "");  // empty
  EXPECT_EQ(rule(view(DType::kFloat32, {0}, {1}, 1000, s)), "");     // empty ignores offset past end
}

// The element count follows torch's safe_compute_numel: a uint64 product checked at
// every step (a zero dimension after an overflow does not save it) that must fit int64.
TEST(CoreTensor, ElementCountMustFitInt64AsInTorch) {
  auto s = iota_storage(48);
  const std::int64_t big = std::int64_t{1} << 62;
  EXPECT_EQ(rule(view(DType::kUInt8, {std::int64_t{1} << 31, std::int64_t{1} << 32}, {0, 0}, 0, s)),
            "file/size-overflow");                                                           // 2^63: past int64
  EXPECT_EQ(rule(view(DType::kUInt8, {big, 4, 0}, {0, 0, 0}, 0, s)), "file/size-overflow");  // overflow, then 0
  EXPECT_EQ(rule(view(DType::kUInt8, {0, big, big}, {1, 1, 1}, 0, s)), "");                  // 0 first: never overflows
  EXPECT_EQ(detail::util::numel(std::vector<std::int64_t>{INT64_MAX}), static_cast<std::uint64_t>(INT64_MAX));
  EXPECT_EQ(detail::util::numel(std::vector<std::int64_t>{}), 1u);
}

// The bound is on the bytes described beyond the storage's: a tensor that does not
// overlap describes none beyond whatever its size; an expanded one is refused one byte
// past the limit, as kind limit.
TEST(CoreTensor, ExpansionIsBoundedBeyondTheStorage) {
  auto s = iota_storage(48);
  Limits l;
  l.max_expanded_bytes = 0;
  auto expansion = [&](const Tensor& t) { return testing::rule_of([&] { detail::core::check_expansion(t, l); }); };
  EXPECT_EQ(expansion(view(DType::kFloat32, {3, 4}, {4, 1}, 0, s)), "");  // the whole storage
  EXPECT_EQ(expansion(view(DType::kFloat32, {4, 3}, {1, 4}, 0, s)), "");  // transposed
  EXPECT_EQ(expansion(view(DType::kFloat32, {12}, {0}, 0, s)), "");       // overlapping, 48 bytes: not beyond
  const Tensor wide = view(DType::kFloat32, {1000}, {0}, 0, s);           // 4000 bytes over 48
  EXPECT_EQ(expansion(wide), "tensor/expanded-too-large");
  l.max_expanded_bytes = 4000 - 48;
  EXPECT_EQ(expansion(wide), "");
  l.max_expanded_bytes = 4000 - 49;
  try {
    detail::core::check_expansion(wide, l);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kLimit);
    EXPECT_NE(e.detail().find("shape [1000], strides [0]"), std::string::npos) << e.detail();
  }
  EXPECT_EQ(Limits{}.max_expanded_bytes, 1ull << 32);
}

TEST(CoreTensor, ValidateRejectsBadShapes) {
  auto s = iota_storage(48);
  EXPECT_EQ(rule(view(DType::kFloat32, {-1}, {1}, 0, s)), rules::kBadShape.id);
  EXPECT_EQ(rule(view(DType::kFloat32, {2, -3}, {1, 1}, 0, s)), rules::kBadShape.id);
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {-1}, 1, s)), rules::kBadShape.id);    // negative stride
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {1, 1}, 0, s)), rules::kBadShape.id);  // strides/shape mismatch
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {1}, -1, s)), rules::kBadShape.id);    // negative offset
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {1}, 0, nullptr)), rules::kBadShape.id);
}

TEST(CoreTensor, ValidateRejectsOverflow) {
  auto s = iota_storage(48);
  const std::int64_t big = std::int64_t{1} << 32;
  EXPECT_EQ(rule(view(DType::kUInt8, {big, big, 2}, {0, 0, 0}, 0, s)), rules::kSizeOverflow.id);        // numel
  EXPECT_EQ(rule(view(DType::kFloat64, {std::int64_t{1} << 61}, {0}, 0, s)), rules::kSizeOverflow.id);  // bits
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {std::int64_t{1} << 62}, 0, s)), rules::kSizeOverflow.id);  // extent bytes
  EXPECT_EQ(rule(view(DType::kFloat32, {3}, {INT64_MAX}, 0, s)), rules::kSizeOverflow.id);              // extent elems
  // Two steps of 2^63-1 still fit in u64 (then the view is out of bounds); three do not.
  EXPECT_EQ(rule(view(DType::kUInt8, {2, 2}, {INT64_MAX, INT64_MAX}, 0, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kUInt8, {2, 2, 2}, {INT64_MAX, INT64_MAX, INT64_MAX}, 0, s)), rules::kSizeOverflow.id);
}

TEST(CoreTensor, ValidateRejectsViewsOutOfBounds) {
  auto s = iota_storage(48);  // 12 floats
  EXPECT_EQ(rule(view(DType::kFloat32, {13}, {1}, 0, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {1}, 11, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kFloat32, {}, {}, 12, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kFloat32, {3, 4}, {1, 3}, 1, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kFloat32, {2}, {12}, 0, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kFloat64, {7}, {1}, 0, s)), rules::kViewOutOfBounds.id);
}

TEST(CoreTensor, SubByteTensorsMustBePackedFromZero) {
  auto s = iota_storage(2);
  EXPECT_EQ(rule(view(DType::kFloat4E2M1FN, {4}, {1}, 0, s)), "");
  EXPECT_EQ(rule(view(DType::kFloat4E2M1FN, {3}, {1}, 0, s)), rules::kBadShape.id);        // 12 bits
  EXPECT_EQ(rule(view(DType::kFloat4E2M1FN, {2}, {1}, 1, s)), rules::kBadShape.id);        // offset
  EXPECT_EQ(rule(view(DType::kFloat4E2M1FN, {2, 2}, {1, 2}, 0, s)), rules::kBadShape.id);  // strided
  EXPECT_EQ(rule(view(DType::kFloat4E2M1FN, {6}, {1}, 0, s)), rules::kViewOutOfBounds.id);
  EXPECT_EQ(rule(view(DType::kFloat6E3M2FN, {4}, {1}, 0, iota_storage(3))), "");
}

// ---- contiguity ---------------------------------------------------------------------

TEST(CoreTensor, IsContiguousIgnoresSizeOneAndEmpty) {
  auto s = iota_storage(64);
  EXPECT_TRUE(view(DType::kUInt8, {2, 3}, {3, 1}, 0, s).is_contiguous());
  EXPECT_FALSE(view(DType::kUInt8, {2, 3}, {1, 2}, 0, s).is_contiguous());
  EXPECT_TRUE(view(DType::kUInt8, {2, 1, 3}, {3, 99, 1}, 0, s).is_contiguous());
  EXPECT_TRUE(view(DType::kUInt8, {0, 3}, {7, 7}, 0, s).is_contiguous());
  EXPECT_TRUE(view(DType::kUInt8, {}, {}, 5, s).is_contiguous());
  EXPECT_FALSE(view(DType::kUInt8, {4}, {0}, 0, s).is_contiguous());
  EXPECT_EQ(Tensor::contiguous_strides(std::vector<std::int64_t>{2, 0, 3}), (std::vector<std::int64_t>{3, 3, 1}));
  EXPECT_EQ(Tensor::contiguous_strides(std::vector<std::int64_t>{}), std::vector<std::int64_t>{});
}

TEST(CoreTensor, NumelNbytesAndExtent) {
  auto s = iota_storage(64);
  Tensor t = view(DType::kInt16, {3, 2}, {1, 3}, 2, s);
  EXPECT_EQ(t.numel(), 6u);
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_EQ(t.storage_extent(), (std::pair<std::uint64_t, std::uint64_t>{4, 16}));
  EXPECT_EQ(view(DType::kInt16, {0}, {1}, 3, s).storage_extent(), (std::pair<std::uint64_t, std::uint64_t>{0, 0}));
  EXPECT_EQ(view(DType::kFloat4E2M1FN, {6}, {1}, 0, s).nbytes(), 3u);
  EXPECT_EQ(view(DType::kFloat32, {}, {}, 0, s).numel(), 1u);
}

// ---- for_each_run vs a naive gather ------------------------------------------------

std::vector<std::byte> naive_gather(const Tensor& t) {
  std::vector<std::byte> out;
  const std::uint64_t item = itemsize(t.dtype);
  const auto bytes = t.storage->bytes();
  if (t.numel() == 0) return out;
  std::vector<std::int64_t> idx(t.shape.size(), 0);
  for (std::uint64_t n = 0; n < t.numel(); ++n) {
    std::int64_t pos = t.storage_offset;
    for (std::size_t d = 0; d < idx.size(); ++d) pos += idx[d] * t.strides[d];
    for (std::uint64_t b = 0; b < item; ++b) out.push_back(bytes[pos * item + b]);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<std::byte> runs_of(const Tensor& t, std::size_t* count = nullptr) {
  std::vector<std::byte> out;
  std::size_t n = 0;
  t.for_each_run([&](std::span<const std::byte> r) {
    EXPECT_FALSE(r.empty());
    // Zero-copy: every run lies inside the storage.
    EXPECT_GE(r.data(), t.storage->bytes().data());
    EXPECT_LE(r.data() + r.size(), t.storage->bytes().data() + t.storage->size());
    out.insert(out.end(), r.begin(), r.end());
    ++n;
  });
  if (count) *count = n;
  return out;
}

TEST(CoreTensor, ForEachRunKnownViews) {
  auto s = iota_storage(4 * 24);
  std::size_t runs = 0;
  // Contiguous: one run.
  Tensor c = view(DType::kFloat32, {2, 3, 4}, {12, 4, 1}, 0, s);
  EXPECT_EQ(runs_of(c, &runs), naive_gather(c));
  EXPECT_EQ(runs, 1u);
  // Slice of rows [.., 1:3] in the middle dimension: inner dim contiguous -> runs of 4*...
  Tensor sl = view(DType::kFloat32, {2, 2, 4}, {12, 4, 1}, 4, s);
  EXPECT_EQ(runs_of(sl, &runs), naive_gather(sl));
  EXPECT_EQ(runs, 2u);  // two blocks of 2x4 contiguous floats
  // Permuted (transpose of the last two dims): element-wise runs.
  Tensor p = view(DType::kFloat32, {2, 4, 3}, {12, 1, 4}, 0, s);
  EXPECT_EQ(runs_of(p, &runs), naive_gather(p));
  EXPECT_EQ(runs, 24u);
  // Stride 0 (expanded row).
  Tensor e = view(DType::kFloat32, {3, 4}, {0, 1}, 0, s);
  EXPECT_EQ(runs_of(e, &runs), naive_gather(e));
  EXPECT_EQ(runs, 3u);
  // Every other element.
  Tensor st = view(DType::kUInt8, {5}, {2}, 1, s);
  EXPECT_EQ(runs_of(st, &runs), naive_gather(st));
  EXPECT_EQ(runs, 5u);
  // Empty: no calls.
  Tensor z = view(DType::kFloat32, {3, 0}, {0, 1}, 0, s);
  EXPECT_TRUE(runs_of(z, &runs).empty());
  EXPECT_EQ(runs, 0u);
}

TEST(CoreTensor, ForEachRunMatchesNaiveGatherOnRandomViews) {
  std::mt19937_64 rng(12345);
  auto s = iota_storage(1 << 16);
  int checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const DType d =
        std::array{DType::kUInt8, DType::kInt16, DType::kFloat32, DType::kFloat64, DType::kComplex64}[rng() % 5];
    const std::uint64_t item = itemsize(d);
    const std::size_t nd = rng() % 5;
    std::vector<std::int64_t> base(nd);
    for (auto& x : base) x = 1 + static_cast<std::int64_t>(rng() % 5);
    // Start from a contiguous base tensor, then permute, slice (offset + step) and
    // sometimes expand a dimension (stride 0) or make one size 1 or 0.
    auto strides = Tensor::contiguous_strides(base);
    std::vector<std::int64_t> shape = base;
    std::int64_t offset = static_cast<std::int64_t>(rng() % 7);
    std::vector<std::size_t> perm(nd);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::int64_t> ps(nd), pst(nd);
    for (std::size_t i = 0; i < nd; ++i) {
      ps[i] = shape[perm[i]];
      pst[i] = strides[perm[i]];
    }
    for (std::size_t i = 0; i < nd; ++i) {
      const auto r = rng() % 6;
      if (r == 0 && ps[i] > 1) {  // slice with a step
        const std::int64_t step = 2;
        ps[i] = (ps[i] + 1) / step;
        pst[i] *= step;
      } else if (r == 1) {
        pst[i] = 0;  // expand
        ps[i] = 1 + static_cast<std::int64_t>(rng() % 4);
      } else if (r == 2 && ps[i] > 1) {  // narrow from 1
        offset += pst[i];
        ps[i] -= 1;
      } else if (r == 3 && rng() % 8 == 0) {
        ps[i] = 0;
      }
    }
    Tensor t = view(d, ps, pst, offset, s);
    ASSERT_EQ(rule(t), "") << iter;
    ASSERT_LE(t.storage_extent().second, s->size());
    const auto want = naive_gather(t);
    EXPECT_EQ(runs_of(t), want) << "iter " << iter;
    std::vector<std::byte> scratch;
    auto cb = t.contiguous_bytes(scratch);
    EXPECT_EQ(std::vector<std::byte>(cb.begin(), cb.end()), want) << "iter " << iter;
    EXPECT_EQ(want.size(), t.numel() * item);
    if (t.is_contiguous() && t.numel() > 0) {
      // Zero-copy: a contiguous view returns a span into the storage itself.
      EXPECT_EQ(cb.data(), s->bytes().data() + t.storage_offset * item);
      EXPECT_TRUE(scratch.empty());
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3000);
}

TEST(CoreTensor, MakeContiguous) {
  auto t = make_contiguous(DType::kFloat32, {2, 3}, iota_storage(24));
  EXPECT_EQ(t->strides, (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(t->storage_offset, 0);
  EXPECT_NO_THROW(t->validate());
  EXPECT_TRUE(t->is_contiguous());
  EXPECT_FALSE(t->requires_grad);
}

// ---- lazy_view ---------------------------------------------------------------------------

template <typename T>
std::shared_ptr<const Storage> storage_of(std::vector<T> xs) {
  std::vector<std::byte> b(xs.size() * sizeof(T));
  std::memcpy(b.data(), xs.data(), b.size());
  return Storage::owned(std::move(b));
}

template <typename T>
std::vector<T> values_of(const Storage& s) {
  std::vector<T> out(s.size() / sizeof(T));
  std::memcpy(out.data(), s.bytes().data(), out.size() * sizeof(T));
  return out;
}

TEST(CoreTensor, LazyViewKeepsTheRawStorageAndDefersTheValues) {
  // complex64 {1+2i, -3-0i}: conj negates imaginary parts, neg both, neg+conj real parts.
  auto raw_storage = storage_of<float>({1, 2, -3, -0.0f});
  const Tensor raw = view(DType::kComplex64, {2}, {1}, 0, raw_storage);
  const auto c = lazy_view(raw, false, true), n = lazy_view(raw, true, false), nc = lazy_view(raw, true, true);
  for (const auto& t : {c, n, nc}) {
    ASSERT_TRUE(t->lazy);
    EXPECT_EQ(t->lazy->raw, raw_storage);  // shared, not copied
    EXPECT_EQ(t->storage->size(), raw_storage->size());
    EXPECT_EQ(raw_view(*t).storage, raw_storage);
    EXPECT_FALSE(raw_view(*t).lazy);
  }
  EXPECT_EQ(values_of<float>(*c->storage), (std::vector<float>{1, -2, -3, 0.0f}));
  EXPECT_EQ(values_of<float>(*n->storage), (std::vector<float>{-1, -2, 3, 0.0f}));
  EXPECT_EQ(values_of<float>(*nc->storage), (std::vector<float>{-1, 2, 3, -0.0f}));
  EXPECT_TRUE(std::signbit(values_of<float>(*nc->storage)[3]));  // -0.0 kept, bit-exact
  EXPECT_FALSE(std::signbit(values_of<float>(*c->storage)[3]));
  EXPECT_EQ(values_of<float>(*raw_storage), (std::vector<float>{1, 2, -3, -0.0f}));  // untouched
  // Integers negate in two's complement (INT_MIN stays INT_MIN, as torch's neg).
  const auto i = lazy_view(view(DType::kInt32, {3}, {1}, 0, storage_of<std::int32_t>({5, -7, INT32_MIN})), true, false);
  EXPECT_EQ(values_of<std::int32_t>(*i->storage), (std::vector<std::int32_t>{-5, 7, INT32_MIN}));
  // No bit: the raw view itself.
  EXPECT_FALSE(lazy_view(raw, false, false)->lazy);
}

TEST(CoreTensor, LazyViewRefusesBitsTorchCannotSet) {
  auto s = iota_storage(16);
  EXPECT_FALSE(can_carry_lazy_bits(DType::kFloat32, false, true));
  EXPECT_FALSE(can_carry_lazy_bits(DType::kBool, true, false));
  EXPECT_TRUE(can_carry_lazy_bits(DType::kComplex128, true, true));
  EXPECT_EQ(testing::rule_of([&] { (void)lazy_view(view(DType::kFloat32, {4}, {1}, 0, s), false, true); }),
            "api/invalid-argument");
  EXPECT_EQ(testing::rule_of([&] { (void)lazy_view(view(DType::kBool, {4}, {1}, 0, s), true, false); }),
            "api/invalid-argument");
  const auto n = lazy_view(view(DType::kFloat32, {4}, {1}, 0, s), true, false);
  EXPECT_EQ(testing::rule_of([&] { (void)lazy_view(*n, true, false); }), "api/invalid-argument");
}

}  // namespace
}  // namespace tensorseal
