// The numpy formats' entry points (their rows in src/api/formats.cc): .npy arrays and
// .npz archives of them.
#pragma once

#include <cstddef>
#include <span>

#include "io/input.h"
#include "io/sink.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::numpy {

bool detect_npy(std::span<const std::byte> head) noexcept;
// A zip whose first member is a .npy, or an empty zip (np.savez() with no arrays;
// torch never writes an empty archive).
bool detect_npz(std::span<const std::byte> head) noexcept;
Checkpoint read_npy(const io::Input& in);
Checkpoint read_npz(const io::Input& in);
void write_npy(const Value& root, const WriteOptions& options, io::Sink& sink);
void write_npz(const Value& root, const WriteOptions& options, io::Sink& sink);

}  // namespace tensorseal::detail::numpy
