// torch.distributed.checkpoint directories' entry points (their row in
// src/api/formats.cc). A directory is read through its .metadata file, which is what
// detection sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "io/input.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::dcp {

// The writer's options (WriteOptions::format_options), parsed.
struct WriteParams {
  // The number of ranks whose files the tensors are split over (dim 0, like DTensor
  // Shard(0)): the layout the reader gives (Checkpoint::layout), which `canon` keeps.
  std::uint32_t world_size = 1;
};
WriteParams write_params(const WriteOptions& options);
// "4" -> "4": a rank count from 1 to 2^20; api/invalid-argument otherwise.
std::string parse_world_size(std::string_view text);

inline constexpr FormatParam kWriteParams[] = {
    {.name = "world_size",
     .flag = "world-size",
     .value = "N",
     .help = "write OUT as a canonical torch.distributed.checkpoint directory split over N ranks' files "
             "(implies --to dcp)",
     .parse = parse_world_size,
     .replaces = ""},
};

// A .metadata pickle (dcp::looks_like_metadata). Never throws.
bool detect_dcp(std::span<const std::byte> head) noexcept;
// Reads the .metadata `in` (a file on disk: in.directory is set), every item it
// references (each through in.read_nested), assembles the tensors from their chunks
// and restores the nesting. Throws the dcp/ rules of dcp/constants.h.
Checkpoint read_dcp(const io::Input& in);
// Writes `root` (a state dict) as the canonical DCP directory `dir` (grammar at the
// top of writer.cc) for WriteParams::world_size ranks, atomically as a whole.
void write_dcp(const Value& root, const WriteOptions& options, const std::filesystem::path& dir);
// Allows replacing `target` by a DCP directory: it must be a directory holding only
// what DCP and tensorseal.dcp write (.metadata, __<rank>.metadata, .tensorseal.json,
// __*.distcp); throws
// dcp/write-target otherwise.
void check_dcp_target(const std::filesystem::path& target);
// `dir`/.metadata when it exists, else the lowest rank's `dir`/__<rank>.metadata (the
// per-rank layout, dcp/ranks.h) when there is one, else an empty path. Never throws.
std::filesystem::path find_dcp_metadata(const std::filesystem::path& dir) noexcept;

}  // namespace tensorseal::detail::dcp
