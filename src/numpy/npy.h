// Internal .npy codec pieces shared by the .npy and .npz readers and writers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tensorseal/limits.h"
#include "tensorseal/storage.h"
#include "tensorseal/tensor.h"

namespace tensorseal::detail::numpy {

struct Parsed {
  std::shared_ptr<Tensor> tensor;
  int major = 1, minor = 0;
  std::uint64_t data_offset = 0;      // first data byte inside the image
  std::uint64_t trailing_spaces = 0;  // spaces between the dict's '}' and the final '\n'
  bool big_endian = false;            // data was big-endian (parse: swapped into an owned storage)
  bool fortran_order = false;
  std::string descr;
};

// Parses one whole .npy image held by `image` (exactly the image's bytes). The tensor
// views `image` (zero-copy; Fortran order gives column-major strides) unless the data
// is big-endian, in which case it is swapped into an owned little-endian storage.
// Throws Error with offsets relative to the image and no file name: callers locate it.
// Reads only the header at the start of `head` (a prefix of a .npy image); returns the
// offset of the data when the array is an object array (its data is a pickle), else
// nullopt. Throws the same errors as parse for a malformed header.
[[nodiscard]] std::optional<std::uint64_t> object_array_data(std::span<const std::byte> head);
// What numpy.load(allow_pickle=True) does with an image starting with `head` (a prefix
// is enough): the offset of its data when numpy could unpickle it, else nullopt. nullopt
// only when the header, read exactly as literal_eval reads it, makes numpy refuse the
// file or gives a dtype that cannot hold objects; any other header (other spellings,
// escapes, a header past `head`) gives the offset (src/numpy/pickled_data.cc). Throws
// npy/bad-magic, npy/unsupported-version or npy/truncated-header where numpy refuses
// the prefix before reading data.
[[nodiscard]] std::optional<std::uint64_t> pickled_data(std::span<const std::byte> head);
[[nodiscard]] Parsed parse(const std::shared_ptr<const Storage>& image, const Limits& limits);
// parse's checks from the header alone: `head` is a prefix of an image of `size` bytes
// holding at least the whole header. The tensor has no storage yet (the caller gives it
// one of tensor->nbytes() bytes at data_offset, then validates); big_endian says the
// data is big-endian, not yet swapped.
[[nodiscard]] Parsed parse_header(std::span<const std::byte> head, std::uint64_t size, const Limits& limits);

// The exact header numpy.lib.format writes for a C-order array (magic, version,
// length, dict literal, growth and alignment padding, '\n'): version 1.0 unless the
// header needs 2.0.
[[nodiscard]] std::string header(std::string_view descr, bool fortran_order, std::span<const std::int64_t> shape);

// Header + data size of a tensor's .npy image; throws npy/dtype-not-writable when
// numpy has no dtype for the tensor's.
[[nodiscard]] std::string header_for(const Tensor& t);

}  // namespace tensorseal::detail::numpy
