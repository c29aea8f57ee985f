// `diff`: value-level comparison of two checkpoints (see tensorseal/diff.h).
//
// Plan: flatten both trees into paths; pair tensors by path; detect renames among the
// unpaired ones by (sha256, dtype, shape); compare non-tensor leaves by exact keys;
// then compare the paired tensors' elements. Element work is cut into chunks of
// kChunkElems elements (across all tensors) run on a thread pool; every chunk fills
// its own Stats and the chunks of a tensor are merged in index order afterwards, so
// the result is the same for any thread count.
#include "tensorseal/diff.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tools/diff_walk.h"
#include "tools/elements.h"
#include "tools/json.h"
#include "tools/quantization.h"
#include "util/parallel.h"
#include "util/progress.h"

namespace tensorseal {
namespace {

using detail::tools::ElementCodec;

constexpr std::uint64_t kChunkElems = std::uint64_t{1} << 18;
constexpr std::size_t kBuckets = 65;  // ULP distance 0, then [2^(k-1), 2^k) for k = 1..64
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Mode : std::uint8_t { kBytes, kFloat, kInt, kComplex, kCross };

struct Pair {
  std::size_t report;  // index into DiffReport::tensors
  Mode mode;
  const ElementCodec* ca;
  const ElementCodec* cb;
  const ElementCodec* coarse;  // kCross: dtype ULPs are measured in
  bool coarse_is_b = true;
  std::uint64_t units;      // elements (bytes for packed sub-byte types in kBytes)
  std::uint32_t unit_size;  // bytes per unit on side a (== side b unless kCross)
  std::span<const std::byte> a, b;
};

struct Stats {
  std::uint64_t bit_different = 0, value_different = 0, out_of_tolerance = 0;
  std::uint64_t nan_payload = 0, nan_mismatch = 0, inf_mismatch = 0;
  double max_abs = 0, max_rel = 0, max_ulp = 0;
  std::uint64_t first = ~std::uint64_t{0};
  std::vector<std::uint64_t> hist;

  void add_hist(std::size_t bucket, std::uint64_t n = 1) {
    if (!hist.empty()) hist[bucket] += n;
  }
  void merge(const Stats& o) {
    bit_different += o.bit_different;
    value_different += o.value_different;
    out_of_tolerance += o.out_of_tolerance;
    nan_payload += o.nan_payload;
    nan_mismatch += o.nan_mismatch;
    inf_mismatch += o.inf_mismatch;
    max_abs = std::max(max_abs, o.max_abs);
    max_rel = std::max(max_rel, o.max_rel);
    max_ulp = std::max(max_ulp, o.max_ulp);
    if (first == ~std::uint64_t{0}) first = o.first;  // chunks merge in index order
    for (std::size_t i = 0; i < o.hist.size() && i < hist.size(); ++i) hist[i] += o.hist[i];
  }
};

std::size_t bucket_of(std::uint64_t ulp) { return ulp == 0 ? 0 : static_cast<std::size_t>(64 - __builtin_clzll(ulp)); }

std::uint64_t clamp_u64(unsigned __int128 v) {
  return v > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                       : static_cast<std::uint64_t>(v);
}

unsigned __int128 abs128(__int128 v) {
  return v < 0 ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
}

struct Comparer {
  const DiffOptions& opt;

  bool within(double abs, double b, double ulp) const {
    return abs <= opt.atol + opt.rtol * std::fabs(b) || ulp <= static_cast<double>(opt.ulp);
  }

  // An element that is numerically different: update the maxima and the tolerance count.
  void numeric(Stats& s, double abs, double rel, double ulp, double b, std::uint64_t ulp_bucket_value) const {
    ++s.value_different;
    s.max_abs = std::max(s.max_abs, abs);
    s.max_rel = std::max(s.max_rel, rel);
    s.max_ulp = std::max(s.max_ulp, ulp);
    s.add_hist(bucket_of(ulp_bucket_value));
    if (!within(abs, b, ulp)) ++s.out_of_tolerance;
  }

  static double rel_of(double abs, double b_magnitude) { return b_magnitude == 0 ? kInf : abs / b_magnitude; }

  void run(const Pair& p, std::uint64_t begin, std::uint64_t end, Stats& s) const {
    const std::uint32_t ua = p.unit_size;
    const std::uint32_t ub = p.mode == Mode::kCross ? p.cb->size : ua;
    const std::byte* pa = p.a.data() + begin * ua;
    const std::byte* pb = p.b.data() + begin * ub;
    if (p.mode != Mode::kCross && std::memcmp(pa, pb, (end - begin) * ua) == 0) {
      s.add_hist(0, end - begin);
      return;
    }
    for (std::uint64_t i = begin; i < end; ++i, pa += ua, pb += ub) {
      switch (p.mode) {
        case Mode::kBytes:
          bytes(pa, pb, ua, i, s);
          break;
        case Mode::kFloat:
          real(*p.ca, pa, pb, i, s);
          break;
        case Mode::kInt:
          integer(*p.ca, pa, pb, i, s);
          break;
        case Mode::kComplex:
          complex(*p.ca, pa, pb, i, s);
          break;
        case Mode::kCross:
          cross(p, pa, pb, i, s);
          break;
      }
    }
  }

  void bytes(const std::byte* a, const std::byte* b, std::uint32_t n, std::uint64_t i, Stats& s) const {
    if (std::memcmp(a, b, n) == 0) {
      s.add_hist(0);
      return;
    }
    ++s.bit_different;
    ++s.value_different;
    ++s.out_of_tolerance;
    if (s.first == ~std::uint64_t{0}) s.first = i;
  }

  void real(const ElementCodec& c, const std::byte* pa, const std::byte* pb, std::uint64_t i, Stats& s) const {
    const std::uint64_t ba = detail::tools::load_bits(c, pa), bb = detail::tools::load_bits(c, pb);
    if (ba == bb) {
      s.add_hist(0);
      return;
    }
    ++s.bit_different;
    if (s.first == ~std::uint64_t{0}) s.first = i;
    const double x = detail::tools::float_from_bits(c, ba), y = detail::tools::float_from_bits(c, bb);
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx && ny) {
      ++s.nan_payload;
      s.add_hist(0);
      return;
    }
    if (nx || ny) {
      ++s.nan_mismatch;
      ++s.value_different;
      ++s.out_of_tolerance;
      return;
    }
    if (x == y) {  // -0 vs +0
      s.add_hist(0);
      return;
    }
    if (std::isinf(x) || std::isinf(y)) ++s.inf_mismatch;
    const double abs = std::fabs(x - y);
    const std::uint64_t ulp =
        clamp_u64(abs128(detail::tools::float_ordinal(c, ba) - detail::tools::float_ordinal(c, bb)));
    numeric(s, abs, rel_of(abs, std::fabs(y)), static_cast<double>(ulp), y, ulp);
  }

  void integer(const ElementCodec& c, const std::byte* pa, const std::byte* pb, std::uint64_t i, Stats& s) const {
    const __int128 x = detail::tools::int_value(c, pa), y = detail::tools::int_value(c, pb);
    if (x == y) {
      s.add_hist(0);
      return;
    }
    ++s.bit_different;
    if (s.first == ~std::uint64_t{0}) s.first = i;
    const std::uint64_t d = clamp_u64(abs128(x - y));
    const double abs = static_cast<double>(d);
    const double yb = static_cast<double>(y);
    numeric(s, abs, rel_of(abs, std::fabs(yb)), abs, yb, d);
  }

  void complex(const ElementCodec& c, const std::byte* pa, const std::byte* pb, std::uint64_t i, Stats& s) const {
    std::uint64_t ra = detail::tools::load_bits(c, pa, 0), ia = detail::tools::load_bits(c, pa, 1);
    std::uint64_t rb = detail::tools::load_bits(c, pb, 0), ib = detail::tools::load_bits(c, pb, 1);
    if (ra == rb && ia == ib) {
      s.add_hist(0);
      return;
    }
    ++s.bit_different;
    if (s.first == ~std::uint64_t{0}) s.first = i;
    const double xr = detail::tools::float_from_bits(c, ra), xi = detail::tools::float_from_bits(c, ia);
    const double yr = detail::tools::float_from_bits(c, rb), yi = detail::tools::float_from_bits(c, ib);
    const bool nx = std::isnan(xr) || std::isnan(xi), ny = std::isnan(yr) || std::isnan(yi);
    if (nx && ny) {
      ++s.nan_payload;
      s.add_hist(0);
      return;
    }
    if (nx || ny) {
      ++s.nan_mismatch;
      ++s.value_different;
      ++s.out_of_tolerance;
      return;
    }
    if (xr == yr && xi == yi) {
      s.add_hist(0);
      return;
    }
    if (std::isinf(xr) || std::isinf(xi) || std::isinf(yr) || std::isinf(yi)) ++s.inf_mismatch;
    const double abs = std::hypot(xr - yr, xi - yi);
    const double bmag = std::hypot(yr, yi);
    const std::uint64_t ulp =
        std::max(clamp_u64(abs128(detail::tools::float_ordinal(c, ra) - detail::tools::float_ordinal(c, rb))),
                 clamp_u64(abs128(detail::tools::float_ordinal(c, ia) - detail::tools::float_ordinal(c, ib))));
    numeric(s, abs, rel_of(abs, bmag), static_cast<double>(ulp), bmag, ulp);
  }

  // Different dtypes: both sides as float64 (real, imaginary); ULPs of the coarser dtype,
  // measured at the coarser side's value, fractional.
  void cross(const Pair& p, const std::byte* pa, const std::byte* pb, std::uint64_t i, Stats& s) const {
    ++s.bit_different;
    const double xr = detail::tools::component_value(*p.ca, pa, 0),
                 xi = p.ca->complex ? detail::tools::component_value(*p.ca, pa, 1) : 0;
    const double yr = detail::tools::component_value(*p.cb, pb, 0),
                 yi = p.cb->complex ? detail::tools::component_value(*p.cb, pb, 1) : 0;
    const bool nx = std::isnan(xr) || std::isnan(xi), ny = std::isnan(yr) || std::isnan(yi);
    if (nx && ny) {
      s.add_hist(0);
      return;
    }
    if (s.first == ~std::uint64_t{0} && (nx || ny || xr != yr || xi != yi)) s.first = i;
    if (nx || ny) {
      ++s.nan_mismatch;
      ++s.value_different;
      ++s.out_of_tolerance;
      return;
    }
    if (xr == yr && xi == yi) {
      s.add_hist(0);
      return;
    }
    if (std::isinf(xr) || std::isinf(xi) || std::isinf(yr) || std::isinf(yi)) ++s.inf_mismatch;
    const double abs = std::hypot(xr - yr, xi - yi);
    const double bmag = std::hypot(yr, yi);
    const double cr = p.coarse_is_b ? yr : xr, ci = p.coarse_is_b ? yi : xi;
    double ulp = std::fabs(xr - yr) / detail::tools::ulp_size(*p.coarse, cr);
    if (xi != yi) ulp = std::max(ulp, std::fabs(xi - yi) / detail::tools::ulp_size(*p.coarse, ci));
    const double floored = std::floor(ulp);
    const std::uint64_t bucket_value = floored >= 1.8e19 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(floored);
    numeric(s, abs, rel_of(abs, bmag), ulp, bmag, bucket_value);
  }
};

std::string shape_key(DType d, const std::vector<std::int64_t>& shape) {
  std::string k(name(d));
  for (auto x : shape) k += "," + std::to_string(x);
  return k;
}

std::vector<std::int64_t> unravel(std::uint64_t i, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    const auto n = static_cast<std::uint64_t>(shape[d]);
    if (n == 0) break;
    idx[d] = static_cast<std::int64_t>(i % n);
    i /= n;
  }
  return idx;
}

// Which of two decodable dtypes is coarser (fewer bits of precision; then fewer bits).
bool b_is_coarser(const ElementCodec& a, const ElementCodec& b) {
  if (a.precision != b.precision) return b.precision < a.precision;
  return info(b.dtype).bits <= info(a.dtype).bits;
}

}  // namespace

std::string_view status_name(TensorStatus s) noexcept {
  switch (s) {
    case TensorStatus::kIdentical:
      return "identical";
    case TensorStatus::kNumericallyEqual:
      return "numerically-equal";
    case TensorStatus::kWithinTolerance:
      return "within-tolerance";
    case TensorStatus::kDifferent:
      return "different";
    case TensorStatus::kShapeChanged:
      return "shape-changed";
    case TensorStatus::kIncomparable:
      return "incomparable";
  }
  return "?";
}

std::string TensorDiff::conversion() const {
  if (!dtype_changed()) return {};
  return std::string(name(dtype_a)) + " -> " + std::string(name(dtype_b));
}

bool DiffReport::tensor_equal(const TensorDiff& t) const noexcept {
  if (t.status == TensorStatus::kIdentical) return true;
  return has_tolerance() && (t.status == TensorStatus::kNumericallyEqual || t.status == TensorStatus::kWithinTolerance);
}

bool DiffReport::equal() const noexcept {
  if (!only_in_a.empty() || !only_in_b.empty() || !renamed.empty() || !values.empty()) return false;
  for (const auto& t : tensors)
    if (!tensor_equal(t)) return false;
  return true;
}

std::size_t DiffReport::total_tensors() const noexcept {
  return tensors.size() + only_in_a.size() + only_in_b.size() + renamed.size();
}

std::size_t DiffReport::differing_tensors() const noexcept {
  std::size_t n = only_in_a.size() + only_in_b.size() + renamed.size();
  for (const auto& t : tensors) n += tensor_equal(t) ? 0 : 1;
  return n;
}

std::size_t DiffReport::bit_different_tensors() const noexcept {
  std::size_t n = 0;
  for (const auto& t : tensors) n += t.status == TensorStatus::kIdentical ? 0 : 1;
  return n;
}

std::string DiffReport::verdict() const {
  const auto total = total_tensors();
  if (equal() && bit_different_tensors() == 0) return fmt::format("content identical: {} tensors, 0 differ", total);
  if (equal())
    return fmt::format("equal within tolerance: {} tensors, {} not bit-identical", total, bit_different_tensors());
  std::vector<std::string> parts;
  if (!only_in_a.empty()) parts.push_back(fmt::format("{} only in A", only_in_a.size()));
  if (!only_in_b.empty()) parts.push_back(fmt::format("{} only in B", only_in_b.size()));
  if (!renamed.empty()) parts.push_back(fmt::format("{} renamed", renamed.size()));
  if (!values.empty()) parts.push_back(fmt::format("{} other values differ", values.size()));
  const std::string s = fmt::format("{} of {} tensors differ", differing_tensors(), total);
  return parts.empty() ? s : fmt::format("{} ({})", s, fmt::join(parts, ", "));
}

DiffReport diff(const Checkpoint& a, const Checkpoint& b, const DiffOptions& options) {
  DiffReport r;
  r.file_a = a.file;
  r.file_b = b.file;
  r.atol = options.atol;
  r.rtol = options.rtol;
  r.ulp = options.ulp;
  const detail::tools::Flat fa = detail::tools::flatten(a.root), fb = detail::tools::flatten(b.root);

  // ---- pair tensors by path -------------------------------------------------------
  std::unordered_map<std::string, std::deque<std::size_t>> b_by_path;
  for (std::size_t i = 0; i < fb.tensors.size(); ++i) b_by_path[fb.tensors[i].path].push_back(i);
  std::vector<bool> b_used(fb.tensors.size(), false);
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  std::vector<std::size_t> only_a;
  for (std::size_t i = 0; i < fa.tensors.size(); ++i) {
    auto it = b_by_path.find(fa.tensors[i].path);
    if (it == b_by_path.end() || it->second.empty()) {
      only_a.push_back(i);
      continue;
    }
    pairs.emplace_back(i, it->second.front());
    b_used[it->second.front()] = true;
    it->second.pop_front();
  }
  std::vector<std::size_t> only_b;
  for (std::size_t i = 0; i < fb.tensors.size(); ++i)
    if (!b_used[i]) only_b.push_back(i);

  // ---- one-sided tensors: renamed when dtype, shape and elements match ---------------
  std::vector<TensorRef> one_sided;
  for (auto i : only_a) one_sided.push_back(fa.tensors[i]);
  for (auto i : only_b) one_sided.push_back(fb.tensors[i]);
  for (const auto& t : one_sided) t.tensor->validate();
  const auto digests = tensor_sha256_all(one_sided, options.threads);
  std::unordered_map<std::string, std::deque<std::size_t>> b_by_content;
  for (std::size_t k = 0; k < only_b.size(); ++k) {
    const Tensor& t = *fb.tensors[only_b[k]].tensor;
    b_by_content[digests[only_a.size() + k] + "|" + shape_key(t.dtype, t.shape)].push_back(k);
  }
  std::vector<bool> b_renamed(only_b.size(), false);
  for (std::size_t k = 0; k < only_a.size(); ++k) {
    const TensorRef& ta = fa.tensors[only_a[k]];
    auto it = b_by_content.find(digests[k] + "|" + shape_key(ta.tensor->dtype, ta.tensor->shape));
    if (it != b_by_content.end() && !it->second.empty()) {
      const std::size_t kb = it->second.front();
      it->second.pop_front();
      b_renamed[kb] = true;
      r.renamed.push_back({ta.path, fb.tensors[only_b[kb]].path, ta.tensor->dtype, ta.tensor->shape});
      continue;
    }
    r.only_in_a.push_back({ta.path, ta.tensor->dtype, ta.tensor->shape, digests[k]});
  }
  for (std::size_t k = 0; k < only_b.size(); ++k) {
    if (b_renamed[k]) continue;
    const TensorRef& tb = fb.tensors[only_b[k]];
    r.only_in_b.push_back({tb.path, tb.tensor->dtype, tb.tensor->shape, digests[only_a.size() + k]});
  }

  // ---- non-tensor leaves ----------------------------------------------------------
  std::unordered_map<std::string, std::deque<std::size_t>> leaf_b;
  for (std::size_t i = 0; i < fb.leaves.size(); ++i) leaf_b[fb.leaves[i].path].push_back(i);
  std::vector<bool> leaf_b_used(fb.leaves.size(), false);
  for (const auto& la : fa.leaves) {
    auto it = leaf_b.find(la.path);
    if (it == leaf_b.end() || it->second.empty()) {
      r.values.push_back({detail::tools::path_text(la.path), la.display, std::nullopt});
      continue;
    }
    const auto& lb = fb.leaves[it->second.front()];
    leaf_b_used[it->second.front()] = true;
    it->second.pop_front();
    if (la.key != lb.key) r.values.push_back({detail::tools::path_text(la.path), la.display, lb.display});
  }
  for (std::size_t i = 0; i < fb.leaves.size(); ++i)
    if (!leaf_b_used[i])
      r.values.push_back({detail::tools::path_text(fb.leaves[i].path), std::nullopt, fb.leaves[i].display});

  // ---- paired tensors -------------------------------------------------------------
  std::deque<std::vector<std::byte>> scratch;  // gathered non-contiguous views
  auto elements = [&](const Tensor& t) -> std::span<const std::byte> {
    if (t.is_contiguous() || info(t.dtype).bits % 8 != 0) {
      std::vector<std::byte> unused;
      return t.contiguous_bytes(unused);
    }
    scratch.emplace_back();
    return t.contiguous_bytes(scratch.back());
  };
  std::vector<Pair> work;
  for (auto [ia, ib] : pairs) {
    const Tensor& ta = *fa.tensors[ia].tensor;
    const Tensor& tb = *fb.tensors[ib].tensor;
    ta.validate();
    tb.validate();
    TensorDiff d;
    d.path = fa.tensors[ia].path;
    d.dtype_a = ta.dtype;
    d.dtype_b = tb.dtype;
    d.shape_a = ta.shape;
    d.shape_b = tb.shape;
    d.ulp_dtype = ta.dtype;
    d.requires_grad_a = ta.requires_grad;
    d.requires_grad_b = tb.requires_grad;
    d.parameter_a = ta.is_parameter;
    d.parameter_b = tb.is_parameter;
    if (d.requires_grad_a != d.requires_grad_b)
      r.values.push_back(
          {d.path + " (requires_grad)", d.requires_grad_a ? "True" : "False", d.requires_grad_b ? "True" : "False"});
    if (d.parameter_a != d.parameter_b)
      r.values.push_back(
          {d.path + " (nn.Parameter)", d.parameter_a ? "True" : "False", d.parameter_b ? "True" : "False"});
    auto quant_text = [](const Tensor& t) {
      return t.quantization ? detail::tools::quantization_line(*t.quantization) : std::string("none");
    };
    if (ta.quantization || tb.quantization) {
      const std::string qa = quant_text(ta), qb = quant_text(tb);
      if (qa != qb) r.values.push_back({d.path + " (quantization)", qa, qb});
    }
    if (ta.numpy != tb.numpy)
      r.values.push_back({d.path + " (type)", std::string(python_type_name(ta)), std::string(python_type_name(tb))});
    if (ta.attributes || tb.attributes) {
      const std::string aa = ta.attributes ? repr(*ta.attributes) : "none";
      const std::string ab = tb.attributes ? repr(*tb.attributes) : "none";
      if (aa != ab) r.values.push_back({d.path + " (attributes)", aa, ab});
    }
    const ElementCodec& ca = detail::tools::codec(ta.dtype);
    const ElementCodec& cb = detail::tools::codec(tb.dtype);
    if (ta.shape != tb.shape) {
      d.status = TensorStatus::kShapeChanged;
      r.tensors.push_back(std::move(d));
      continue;
    }
    d.numel = ta.numel();
    Pair p{r.tensors.size(), Mode::kBytes, &ca, &cb, &ca, true, d.numel, ca.size, {}, {}};
    if (ta.dtype != tb.dtype) {
      if (!ca.decodable || !cb.decodable) {
        d.status = TensorStatus::kIncomparable;
        r.tensors.push_back(std::move(d));
        continue;
      }
      p.mode = Mode::kCross;
      p.coarse_is_b = b_is_coarser(ca, cb);
      p.coarse = p.coarse_is_b ? &cb : &ca;
      d.ulp_dtype = p.coarse->dtype;
    } else if (!ca.decodable) {
      p.mode = Mode::kBytes;
      if (ca.size == 0) {  // packed sub-byte: compare byte by byte
        p.units = ta.nbytes();
        p.unit_size = 1;
      }
    } else if (ca.complex) {
      p.mode = Mode::kComplex;
    } else if (ca.kind == DTypeKind::kFloat) {
      p.mode = Mode::kFloat;
    } else {
      p.mode = Mode::kInt;
    }
    d.numeric = p.mode != Mode::kBytes;
    p.a = elements(ta);
    p.b = elements(tb);
    r.tensors.push_back(std::move(d));
    work.push_back(p);
  }

  struct Job {
    std::size_t pair;
    std::uint64_t begin, end;
  };
  std::vector<Job> jobs;
  std::uint64_t total_bytes = 0;
  for (std::size_t k = 0; k < work.size(); ++k) {
    for (std::uint64_t s = 0; s < work[k].units; s += kChunkElems)
      jobs.push_back({k, s, std::min(work[k].units, s + kChunkElems)});
    total_bytes += work[k].a.size();
  }
  std::vector<Stats> results(jobs.size());
  detail::util::ProgressMeter meter(&options.progress, total_bytes);
  const Comparer cmp{options};
  detail::util::parallel_for(jobs.size(), options.threads, [&](std::size_t j) {
    const Job& job = jobs[j];
    const Pair& p = work[job.pair];
    Stats& s = results[j];
    if (options.histogram) s.hist.assign(kBuckets, 0);
    cmp.run(p, job.begin, job.end, s);
    meter.add((job.end - job.begin) * p.unit_size);
  });
  meter.finish();

  // ---- reduce in index order --------------------------------------------------------
  std::vector<Stats> merged(work.size());
  for (auto& m : merged)
    if (options.histogram) m.hist.assign(kBuckets, 0);
  for (std::size_t j = 0; j < jobs.size(); ++j) merged[jobs[j].pair].merge(results[j]);
  for (std::size_t k = 0; k < work.size(); ++k) {
    const Pair& p = work[k];
    Stats& s = merged[k];
    TensorDiff& d = r.tensors[p.report];
    d.bit_different = s.bit_different;
    d.value_different = s.value_different;
    d.out_of_tolerance = s.out_of_tolerance;
    d.nan_payload = s.nan_payload;
    d.nan_mismatch = s.nan_mismatch;
    d.inf_mismatch = s.inf_mismatch;
    d.max_abs = s.max_abs;
    d.max_rel = s.max_rel;
    d.max_ulp = s.max_ulp;
    if (options.histogram) {
      while (!s.hist.empty() && s.hist.back() == 0) s.hist.pop_back();
      d.ulp_histogram = std::move(s.hist);
    }
    if (s.first != ~std::uint64_t{0}) {
      FirstDifference f;
      const std::uint64_t unit = s.first;
      const std::uint32_t ub = p.mode == Mode::kCross ? p.cb->size : p.unit_size;
      const std::byte* ea = p.a.data() + unit * p.unit_size;
      const std::byte* eb = p.b.data() + unit * ub;
      const std::uint64_t element = p.unit_size == 1 && p.ca->size == 0 ? unit * 8 / info(d.dtype_a).bits : unit;
      f.index = unravel(element, d.shape_a);
      if (p.mode == Mode::kBytes) {
        ElementCodec byte_codec = *p.ca;
        byte_codec.size = byte_codec.comp_size = p.unit_size;
        f.a = f.a_bits = detail::tools::element_bits_text(byte_codec, ea);
        f.b = f.b_bits = detail::tools::element_bits_text(byte_codec, eb);
      } else {
        f.a = detail::tools::element_text(*p.ca, ea);
        f.b = detail::tools::element_text(*p.cb, eb);
        f.a_bits = detail::tools::element_bits_text(*p.ca, ea);
        f.b_bits = detail::tools::element_bits_text(*p.cb, eb);
      }
      d.first = std::move(f);
    }
    if (d.bit_different == 0 && !d.dtype_changed())
      d.status = TensorStatus::kIdentical;
    else if (d.value_different == 0)
      d.status = TensorStatus::kNumericallyEqual;
    else if (d.out_of_tolerance == 0)
      d.status = TensorStatus::kWithinTolerance;
    else
      d.status = TensorStatus::kDifferent;
  }
  return r;
}

// ---- JSON -------------------------------------------------------------------------

namespace {

using detail::tools::ojson;

// JSON has no inf/nan: non-finite numbers are written as the strings "inf", "-inf", "nan".
ojson number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

}  // namespace

std::string to_json(const DiffReport& r) {
  ojson j;
  j["file_a"] = r.file_a;
  j["file_b"] = r.file_b;
  j["equal"] = r.equal();
  j["tolerance"] = {{"atol", r.atol}, {"rtol", r.rtol}, {"ulp", r.ulp}};
  std::size_t identical = 0, differing_paired = 0;
  for (const auto& t : r.tensors) {
    identical += t.status == TensorStatus::kIdentical ? 1 : 0;
    differing_paired += r.tensor_equal(t) ? 0 : 1;
  }
  j["summary"] = {{"tensors", r.total_tensors()},
                  {"differing", r.differing_tensors()},
                  {"identical", identical},
                  {"compared", r.tensors.size()},
                  {"compared_differing", differing_paired},
                  {"only_in_a", r.only_in_a.size()},
                  {"only_in_b", r.only_in_b.size()},
                  {"renamed", r.renamed.size()},
                  {"value_differences", r.values.size()}};
  ojson tensors = ojson::array();
  for (const auto& t : r.tensors) {
    ojson e;
    e["path"] = t.path;
    e["status"] = status_name(t.status);
    e["equal"] = r.tensor_equal(t);
    e["dtype_a"] = name(t.dtype_a);
    e["dtype_b"] = name(t.dtype_b);
    e["shape_a"] = t.shape_a;
    e["shape_b"] = t.shape_b;
    e["conversion"] = t.dtype_changed() ? ojson(t.conversion()) : ojson(nullptr);
    e["numel"] = t.numel;
    e["numeric"] = t.numeric;
    e["bit_different"] = t.bit_different;
    e["value_different"] = t.value_different;
    e["out_of_tolerance"] = t.out_of_tolerance;
    e["nan_payload"] = t.nan_payload;
    e["nan_mismatch"] = t.nan_mismatch;
    e["inf_mismatch"] = t.inf_mismatch;
    e["max_abs_error"] = number(t.max_abs);
    e["max_rel_error"] = number(t.max_rel);
    e["max_ulp"] = number(t.max_ulp);
    e["ulp_dtype"] = name(t.ulp_dtype);
    if (t.first) {
      e["first_difference"] = {{"index", t.first->index},
                               {"a", t.first->a},
                               {"b", t.first->b},
                               {"a_bits", t.first->a_bits},
                               {"b_bits", t.first->b_bits}};
    } else {
      e["first_difference"] = nullptr;
    }
    e["ulp_histogram"] = t.ulp_histogram.empty() ? ojson(nullptr) : ojson(t.ulp_histogram);
    tensors.push_back(std::move(e));
  }
  j["tensors"] = std::move(tensors);
  auto one_sided = [](const std::vector<TensorOnly>& v) {
    ojson a = ojson::array();
    for (const auto& t : v)
      a.push_back({{"path", t.path}, {"dtype", name(t.dtype)}, {"shape", t.shape}, {"sha256", t.sha256}});
    return a;
  };
  j["only_in_a"] = one_sided(r.only_in_a);
  j["only_in_b"] = one_sided(r.only_in_b);
  ojson ren = ojson::array();
  for (const auto& t : r.renamed)
    ren.push_back({{"path_a", t.path_a}, {"path_b", t.path_b}, {"dtype", name(t.dtype)}, {"shape", t.shape}});
  j["renamed"] = std::move(ren);
  ojson vals = ojson::array();
  for (const auto& v : r.values)
    vals.push_back({{"path", v.path}, {"a", detail::tools::or_null(v.a)}, {"b", detail::tools::or_null(v.b)}});
  j["values"] = std::move(vals);
  return detail::tools::dump(j);
}

}  // namespace tensorseal
