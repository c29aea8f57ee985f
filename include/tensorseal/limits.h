// tensorseal/limits.h — resource limits applied to every file read.
//
// Every size that comes from a file is checked against these before anything is
// allocated or looped over. Defaults suit real checkpoints; docs/limits.md explains
// each and how to change it: the `limits` of ReadOptions (and of the other Options
// structs) in C++, the `limits=` keyword in Python, the --max-* flags in the CLI.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

struct Limits {
  std::uint64_t max_safetensors_header = 100'000'000;  // same cap as safetensors
  std::uint64_t max_pickle_bytes = 1ull << 32;         // one pickle stream
  std::uint64_t max_pickle_ops = 100'000'000;          // opcodes executed per stream
  std::uint32_t max_depth = 1000;                      // container nesting
  std::uint64_t max_stack = 1'000'000;                 // pickle stack + metastack entries
  std::uint64_t max_memo = 1'000'000;                  // pickle memo entries
  std::uint64_t max_string = 1ull << 31;               // one str/bytes value
  std::uint64_t max_alloc = 1ull << 33;                // bytes allocated while parsing
  std::uint32_t max_nested_files = 8;                  // _load_from_bytes nesting
  std::uint64_t max_entries = 1'000'000;               // zip entries / tensors
  std::uint32_t max_ndim = 64;                         // tensor dimensions
  std::uint64_t max_pickle_inflate = 64ull << 20;      // a compressed pickle record, inflated
  // Deflated members of one archive (an .npz), inflated, all together: up to
  // max_inflate bytes whatever they compress to; past it, at most max_inflate_ratio
  // times their compressed bytes (0: max_inflate is a hard cap).
  std::uint64_t max_inflate = 256ull << 20;
  std::uint64_t max_inflate_ratio = 100;
  // Bytes an overlapping view (stride 0, expand()) may describe beyond its storage's.
  std::uint64_t max_expanded_bytes = 1ull << 32;
};

// The fields of Limits by name ("max_alloc", ...), in declaration order. The CLI's
// flags (--max-alloc) and Python's limits= keys are these names.
[[nodiscard]] std::span<const std::string_view> limit_names() noexcept;
// The field called `name`. Throws Error api/invalid-argument for an unknown name.
[[nodiscard]] std::uint64_t get_limit(const Limits& limits, std::string_view name);
// Sets the field called `name`. Throws Error api/invalid-argument for an unknown name
// or a value the field cannot hold (the 32-bit fields: max_depth, max_nested_files,
// max_ndim).
void set_limit(Limits& limits, std::string_view name, std::uint64_t value);

}  // namespace tensorseal
TENSORSEAL_API_END
