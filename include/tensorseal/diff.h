// tensorseal/diff.h — comparing two checkpoints value by value (`tseal diff`).
//
// Works only on the value tree: the two roots are aligned by path (the paths of
// collect_tensors), so the container format, file layout, dict order and storage
// sharing never matter. For every tensor present in both, the elements are compared
// as numbers of their dtype (float8 variants, bf16, fp16, complex, integers, bool):
// bit-identical or not, how many elements differ, max absolute / relative / ULP
// error, NaN and inf mismatches, the first differing index. Big tensors are split
// into chunks compared on all cores; chunk results are reduced in index order, so
// the report never depends on the thread count. Tensors are read zero-copy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/export.h"
#include "tensorseal/progress.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

struct DiffOptions {
  // An element is within tolerance when |a-b| <= atol + rtol*|b| or its ULP distance
  // is <= ulp. With all three 0 (the default) only bit-exact tensors count as equal.
  double atol = 0, rtol = 0;
  std::uint64_t ulp = 0;
  unsigned threads = 0;    // 0: all cores; never changes the report
  bool histogram = false;  // collect a ULP histogram per tensor (for the HTML report)
  // Bytes of A compared of all (tensorseal/progress.h).
  Progress progress;
};

enum class TensorStatus : std::uint8_t {
  kIdentical,         // same dtype, shape and element bits
  kNumericallyEqual,  // bits differ but every element is the same number (NaN payloads,
                      // -0 vs +0, or a dtype change that lost nothing)
  kWithinTolerance,   // some elements differ, all within the tolerances
  kDifferent,         // some element is outside the tolerances
  kShapeChanged,      // shapes differ: elements not compared
  kIncomparable,      // dtypes differ and one cannot be decoded (raw/packed types)
};
std::string_view status_name(TensorStatus s) noexcept;  // "identical", "numerically-equal", ...

// The first differing element (row-major order).
struct FirstDifference {
  std::vector<std::int64_t> index;  // multi-dimensional index
  std::string a, b;                 // the values, rendered ("1.5", "nan", "(1+2j)")
  std::string a_bits, b_bits;       // the element bytes as hex ("0x3fc00000")
};

struct TensorDiff {
  std::string path;
  DType dtype_a = DType::kFloat32, dtype_b = DType::kFloat32;
  std::vector<std::int64_t> shape_a, shape_b;
  TensorStatus status = TensorStatus::kIdentical;
  std::uint64_t numel = 0;
  bool numeric = false;                // elements compared as numbers (else as bytes only)
  std::uint64_t bit_different = 0;     // elements whose bits differ (all, across dtypes)
  std::uint64_t value_different = 0;   // elements that are different numbers
  std::uint64_t out_of_tolerance = 0;  // elements outside the tolerances
  std::uint64_t nan_payload = 0;       // both NaN with different bits (numerically equal)
  std::uint64_t nan_mismatch = 0;      // NaN on one side only
  std::uint64_t inf_mismatch = 0;      // inf on one side, a finite value (or -inf) on the other
  double max_abs = 0, max_rel = 0;     // over elements that are not NaN on either side
  double max_ulp = 0;                  // in ulp_dtype; fractional across dtypes
  DType ulp_dtype = DType::kFloat32;   // the coarser dtype when they differ
  std::optional<FirstDifference> first;
  // When DiffOptions::histogram: element counts by ULP distance; bucket 0 holds
  // distance 0, bucket k >= 1 holds [2^(k-1), 2^k). Trailing empty buckets trimmed.
  std::vector<std::uint64_t> ulp_histogram;
  bool requires_grad_a = false, requires_grad_b = false;
  bool parameter_a = false, parameter_b = false;

  bool dtype_changed() const noexcept { return dtype_a != dtype_b; }
  // "float32 -> bfloat16" when the dtype changed, else empty.
  std::string conversion() const;
};

// A tensor present on one side only.
struct TensorOnly {
  std::string path;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::string sha256;  // tensor_sha256 of the elements
};

// A tensor whose path changed but whose dtype, shape and elements did not.
struct TensorRenamed {
  std::string path_a, path_b;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
};

// A non-tensor value (or a container's kind) that differs at a path; a missing side
// is nullopt. Values are rendered with repr().
struct ValueDifference {
  std::string path;
  std::optional<std::string> a, b;
};

struct DiffReport {
  std::string file_a, file_b;
  double atol = 0, rtol = 0;
  std::uint64_t ulp = 0;
  std::vector<TensorDiff> tensors;               // present at the same path in both, in A's order
  std::vector<TensorOnly> only_in_a, only_in_b;  // renamed tensors excluded
  std::vector<TensorRenamed> renamed;
  std::vector<ValueDifference> values;

  bool has_tolerance() const noexcept { return atol > 0 || rtol > 0 || ulp > 0; }
  // Whether a paired tensor counts as equal (identical, or within the tolerances
  // when any was given).
  bool tensor_equal(const TensorDiff& t) const noexcept;
  // All tensors equal, nothing only on one side, no renames, no value differences.
  bool equal() const noexcept;
  // Distinct tensors over both sides (a renamed tensor counts once).
  std::size_t total_tensors() const noexcept;
  // Tensors that do not count as equal, including one-sided and renamed ones.
  std::size_t differing_tensors() const noexcept;
  // Paired tensors whose bits are not identical.
  std::size_t bit_different_tensors() const noexcept;
  // The one-line verdict the CLI and the HTML report print: "content identical: N
  // tensors, 0 differ", "equal within tolerance: ...", or "K of N tensors differ (...)".
  std::string verdict() const;
};

// Compares b against a. Throws tensorseal::Error only for broken tensors (views out of
// their storage); everything else is reported.
[[nodiscard]] DiffReport diff(const Checkpoint& a, const Checkpoint& b, const DiffOptions& options = {});

// The report as JSON (schema: docs/cli.md, "tseal diff --json").
[[nodiscard]] std::string to_json(const DiffReport& report);

// A self-contained HTML page (inline CSS/JS/SVG, no network): summary, sortable
// per-tensor table, error per tensor in model order and ULP histograms of the worst
// tensors. The histograms need DiffOptions::histogram.
[[nodiscard]] std::string html_report(const DiffReport& report);
// Writes html_report() to `path` atomically.
void write_html_report(const DiffReport& report, const std::filesystem::path& path);

// A number as diff reports print it: "nan", "inf", "-inf", or printf's
// "%.*g" with `significant_digits`.
[[nodiscard]] std::string number_text(double v, int significant_digits = 4);

}  // namespace tensorseal
TENSORSEAL_API_END
