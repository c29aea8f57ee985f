// torch.distributed.checkpoint directories' entry points (their row in
// src/api/formats.cc). A directory is read through its .metadata file, which is what
// detection sees.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "io/input.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::dcp {

// A .metadata pickle (dcp::looks_like_metadata). Never throws.
bool detect_dcp(std::span<const std::byte> head) noexcept;
// Reads the .metadata `in` (a file on disk: in.directory is set), every item it
// references (each through in.read_nested), assembles the tensors from their chunks
// and restores the nesting. Throws the dcp/ rules of dcp/constants.h.
Checkpoint read_dcp(const io::Input& in);
// Writes `root` (a state dict) as the canonical DCP directory `dir` (grammar at the
// top of writer.cc) for options.world_size ranks, atomically as a whole.
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
