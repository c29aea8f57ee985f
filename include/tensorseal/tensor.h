// tensorseal/tensor.h — a strided view of a storage, as torch defines tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/dtype.h"
#include "tensorseal/export.h"
#include "tensorseal/storage.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

class Value;

// The Python type a pickle rebuilds an array as. Pickled numpy objects (numpy's own
// reduce functions, e.g. np.random.get_state() or an np.float64 in a training
// checkpoint) keep their type: they load as numpy objects, are written back as numpy
// reconstructions, and hash apart from torch tensors. Formats with no Python types
// (safetensors, npy, npz, DCP chunks) read plain tensors (kTorch).
enum class NumpyType : std::uint8_t {
  kNone = 0,    // a torch.Tensor
  kArray = 1,   // a numpy.ndarray
  kScalar = 2,  // a numpy scalar (np.generic: np.float64, np.int32, ...), 0-d
};

// The module a pickle names numpy's reconstruction functions (_reconstruct, scalar,
// _frombuffer) in: numpy 1.x pickles "numpy.core.multiarray", numpy 2
// "numpy._core.multiarray". Not content (the hash ignores it), but writers keep it:
// torch.load(weights_only=True) allowlists match a global's name exactly (numpy 2's
// np._core.multiarray._reconstruct is "numpy._core...", numpy 1.x's "numpy.core..."),
// so a file loads in the same places as its source only with the source's spelling.
enum class NumpyModule : std::uint8_t {
  kCore = 0,            // numpy.core.* (numpy 1.x; numpy 2 still imports it)
  kUnderscoreCore = 1,  // numpy._core.* (numpy 2; numpy 1.x before 1.26 has no such module)
};

struct Tensor;

// How a quantized tensor (dtype qint8, quint8, qint32, quint4x2, quint2x4) maps its
// integers to reals, as torch's _rebuild_qtensor receives it. The tensor's elements
// are the integer representation (torch's Tensor.int_repr()).
struct Quantization {
  enum class Scheme : std::uint8_t {
    kPerTensorAffine = 0,               // torch.per_tensor_affine: scale, zero_point
    kPerChannelAffine = 1,              // torch.per_channel_affine: scales, zero_points, axis
    kPerChannelAffineFloatQParams = 2,  // torch.per_channel_affine_float_qparams: likewise
  };
  Scheme scheme = Scheme::kPerTensorAffine;
  double scale = 1.0;                         // per tensor
  std::int64_t zero_point = 0;                // per tensor
  std::shared_ptr<const Tensor> scales;       // per channel: 1-d, one per index of `axis`
  std::shared_ptr<const Tensor> zero_points;  // per channel: 1-d, the same length
  std::int64_t axis = 0;                      // per channel
  bool per_channel() const noexcept { return scheme != Scheme::kPerTensorAffine; }
};

// torch's name of a scheme without "torch.": "per_tensor_affine", ...
[[nodiscard]] std::string_view scheme_name(Quantization::Scheme s) noexcept;
// Whether tensorseal carries quantized tensors of `d`: qint8, quint8, qint32, what torch
// loads element by element (the packed quint4x2 / quint2x4 are refused, read or written).
[[nodiscard]] bool carries_quantized(DType d) noexcept;

// torch's lazy conjugate and negative bits: z.conj(), z.conj().imag and
// torch._neg_view(z) are views over their base's raw storage that torch flags and
// applies whenever it reads values (a file records them in the metadata argument of
// _rebuild_tensor_v2/_v3). A Tensor with `lazy` set is such a view: its `storage` holds
// the values torch reads (the bits applied element-wise to all of `raw`, computed on
// first use), under the same shape, strides and offset, so whatever reads values sees
// torch's values. Writers that keep torch's sharing (canonical torch files, the Python
// binding's torch tensors) use `raw` and the bits instead.
struct LazyBits {
  std::shared_ptr<const Storage> raw;  // the storage torch holds (shared with the base)
  bool neg = false;                    // every element negated (sign bit of floats and complex parts, two's complement)
  bool conj = false;                   // the imaginary part of every complex element negated
};

struct Tensor {
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements, like torch
  std::int64_t storage_offset = 0;    // in elements
  std::shared_ptr<const Storage> storage;
  bool requires_grad = false;
  bool is_parameter = false;  // torch.nn.Parameter
  NumpyType numpy = NumpyType::kNone;
  NumpyModule numpy_module = NumpyModule::kCore;     // numpy objects only: the spelling pickled
  std::shared_ptr<const Quantization> quantization;  // null unless the dtype is quantized
  // Python attributes torch restores on the tensor object (its __dict__, e.g. the
  // _has_been_cloned FSDP sets on full state dicts), from _rebuild_from_type_v2 /
  // _rebuild_parameter_with_state: a non-empty dict of str keys to values holding no
  // tensor or storage. Null: none (the usual case).
  std::shared_ptr<const Value> attributes;
  // Set for a conj/neg view (LazyBits); null for every other tensor.
  std::shared_ptr<const LazyBits> lazy;

  // Product of the shape (1 for 0-d). Validated tensors never overflow.
  std::uint64_t numel() const noexcept;
  // Bytes of the elements when laid out contiguously (numel * bits / 8).
  std::uint64_t nbytes() const noexcept;
  // Row-major contiguous (size-1 dimensions' strides ignored, as torch does).
  bool is_contiguous() const noexcept;
  // Row-major strides for `shape`. Throws Error{file/size-overflow} when they do not fit
  // int64 (a zero-size shape with huge other dimensions; torch refuses it too).
  static std::vector<std::int64_t> contiguous_strides(std::span<const std::int64_t> shape);

  // Checks shape, strides and offset against the storage with overflow-checked
  // arithmetic: every element the view can reach lies inside the storage.
  // Throws Error{rules::kViewOutOfBounds | kBadShape | kSizeOverflow}.
  void validate() const;

  // Calls `sink` with the tensor's element bytes in row-major order, as maximal
  // contiguous runs of the storage (one call for a contiguous tensor; for a contiguous
  // tensor over a pieced storage, one per piece it covers). Zero-copy, never joins. Over
  // a streamed storage (Storage::is_streamed) a contiguous tensor's runs are the
  // decoder's windows, valid only during the call; a strided one joins.
  void for_each_run(const std::function<void(std::span<const std::byte>)>& sink) const;
  // The element bytes in row-major order, as one span: zero-copy when contiguous,
  // otherwise gathered into `scratch`.
  std::span<const std::byte> contiguous_bytes(std::vector<std::byte>& scratch) const;
  // Byte range [first, last) of the storage this view can reach (0,0 when empty).
  std::pair<std::uint64_t, std::uint64_t> storage_extent() const noexcept;
};

// The Python type torch.load gives for `t`: "torch.Tensor", "torch.nn.Parameter",
// "numpy.ndarray" or "numpy.generic" (a numpy scalar).
[[nodiscard]] std::string_view python_type_name(const Tensor& t) noexcept;

// Whether torch can set these bits on a `dtype` tensor: conj on complex dtypes only;
// neg on integers, float16/bfloat16/float32/float64 and complex (not on bool or the
// 8-bit floats).
[[nodiscard]] bool can_carry_lazy_bits(DType dtype, bool neg, bool conj) noexcept;
// The conj/neg view of `raw`, a view of the raw values (raw.lazy null): `raw` with a
// deferred storage of the applied values and `lazy` set; `raw` itself when neither bit
// is set. Throws Error{api/invalid-argument} when !can_carry_lazy_bits or raw is lazy.
[[nodiscard]] std::shared_ptr<const Tensor> lazy_view(const Tensor& raw, bool neg, bool conj);
// The view of the raw values behind a conj/neg view: `t` over t.lazy->raw, lazy unset.
[[nodiscard]] Tensor raw_view(const Tensor& t);

// Builds a contiguous tensor over `storage` starting at byte 0.
[[nodiscard]] std::shared_ptr<Tensor> make_contiguous(DType dtype, std::vector<std::int64_t> shape,
                                                      std::shared_ptr<const Storage> storage);

// A shape (or an element index) as text: "[2, 3]", "[]" for a scalar.
[[nodiscard]] std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace tensorseal
TENSORSEAL_API_END
