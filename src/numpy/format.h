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
// An object array's .npy image (descr 'O'), data at `data_at`: its pickle read through
// in.read_nested (the restricted reader, never run). The root is the array's pickle.
Checkpoint read_object_npy(const io::Input& in, std::uint64_t data_at);
void write_npy(const Value& root, const WriteOptions& options, io::Sink& sink);
// The whole .npy image of a member that is not a tensor (an object array), written by
// a layer above (it needs the pickle writer); null: only tensors are accepted.
using MemberImage = std::string (*)(const Value& member);
void write_npz(const Value& root, const WriteOptions& options, io::Sink& sink, MemberImage objects = nullptr);

}  // namespace tensorseal::detail::numpy
