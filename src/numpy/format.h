// The numpy formats' entry points (their rows in src/api/formats.cc): .npy arrays and
// .npz archives of them.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "io/input.h"
#include "io/sink.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::numpy {

// The npz writer's options (WriteOptions::format_options), parsed.
struct WriteParams {
  // Every member DEFLATED, as np.savez_compressed stores them, by tensorseal's own
  // encoder (src/zip/deflate.h), whose bytes are the same on every machine
  // (docs/formats/npy.md, "Compressed members"): the layout the reader gives for an
  // archive with DEFLATED members (Checkpoint::layout), which `canon` keeps.
  bool compress = false;
};
WriteParams write_params(const WriteOptions& options);
// "0" or "1"; api/invalid-argument otherwise.
std::string parse_compress(std::string_view text);

inline constexpr FormatParam kNpzWriteParams[] = {
    {.name = "compress",
     .flag = "",
     .value = "0|1",
     .help = "members DEFLATED (np.savez_compressed)",
     .parse = parse_compress,
     .replaces = ""},
};

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
