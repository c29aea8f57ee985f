// The Limits fields by name: one table for the CLI flags and the Python keywords.
#include "tensorseal/limits.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <string>
#include <variant>

#include "tensorseal/error.h"

namespace tensorseal {
namespace {

using Field = std::variant<std::uint64_t Limits::*, std::uint32_t Limits::*>;

struct Entry {
  std::string_view name;
  Field field;
};

constexpr std::array<Entry, 15> kFields = {{
    {"max_safetensors_header", &Limits::max_safetensors_header},
    {"max_pickle_bytes", &Limits::max_pickle_bytes},
    {"max_pickle_ops", &Limits::max_pickle_ops},
    {"max_depth", &Limits::max_depth},
    {"max_stack", &Limits::max_stack},
    {"max_memo", &Limits::max_memo},
    {"max_string", &Limits::max_string},
    {"max_alloc", &Limits::max_alloc},
    {"max_nested_files", &Limits::max_nested_files},
    {"max_entries", &Limits::max_entries},
    {"max_ndim", &Limits::max_ndim},
    {"max_pickle_inflate", &Limits::max_pickle_inflate},
    {"max_inflate", &Limits::max_inflate},
    {"max_inflate_ratio", &Limits::max_inflate_ratio},
    {"max_expanded_bytes", &Limits::max_expanded_bytes},
}};

constexpr std::array<std::string_view, kFields.size()> kNames = [] {
  std::array<std::string_view, kFields.size()> out{};
  for (std::size_t i = 0; i < kFields.size(); ++i) out[i] = kFields[i].name;
  return out;
}();

const Entry& entry(std::string_view name) {
  for (const auto& e : kFields)
    if (e.name == name) return e;
  throw Error(rules::kInvalidArgument, "unknown limit '" + std::string(name) + "'");
}

}  // namespace

std::span<const std::string_view> limit_names() noexcept { return kNames; }

std::uint64_t get_limit(const Limits& limits, std::string_view name) {
  return std::visit([&](auto member) -> std::uint64_t { return limits.*member; }, entry(name).field);
}

void set_limit(Limits& limits, std::string_view name, std::uint64_t value) {
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(limits.*member)>;
        if (value > std::numeric_limits<T>::max())
          throw Error(rules::kInvalidArgument, fmt::format("limit {} = {} is above its largest value {}", name, value,
                                                           std::numeric_limits<T>::max()));
        limits.*member = static_cast<T>(value);
      },
      entry(name).field);
}

}  // namespace tensorseal
