// Shared pieces of the tseal commands. The CLI uses only the public API.
#pragma once

#include <tensorseal/tensorseal.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tseal {

// Exit statuses, like diff/cmp: 0 success/equal, 1 different/findings, 2 error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDifferent = 1;
inline constexpr int kExitError = 2;

// What an add_* function returns: the function to run when its subcommand was chosen.
using Runner = std::function<int()>;

Runner add_inspect(CLI::App& app);
Runner add_hash(CLI::App& app);
Runner add_scan(CLI::App& app);
Runner add_canon(CLI::App& app);
Runner add_convert(CLI::App& app);
Runner add_diff(CLI::App& app);
Runner add_explain(CLI::App& app);
Runner add_verify(CLI::App& app);
Runner add_git_setup(CLI::App& app);
Runner add_manifest(CLI::App& app);
Runner add_sign(CLI::App& app);

// Adds --threads N (0 = all cores) to a command; the value is set while parsing.
std::shared_ptr<unsigned> add_threads(CLI::App* cmd);
// Adds one flag per field of tensorseal::Limits (--max-alloc BYTES, --max-depth N, ...,
// named after limit_names()) to a command that reads files, in the group "Limits".
// The returned Limits holds the defaults, changed by the flags given while parsing.
std::shared_ptr<tensorseal::Limits> add_limits(CLI::App* cmd);
// Adds --format NAME (a name or alias of formats()) to a command that reads files: the
// interpretation of its inputs instead of detection (tensorseal::ReadOptions::format).
// kUnknown when not given.
std::shared_ptr<tensorseal::Format> add_input_format(CLI::App* cmd);
// ReadOptions with these limits, this interpretation and every checksum checked.
tensorseal::ReadOptions read_options(const tensorseal::Limits& limits,
                                     tensorseal::Format format = tensorseal::Format::kUnknown);

// The writer options of every format (FormatInfo::params with a flag: --shards SIZE,
// --world-size N, ...), as the convert flags given; each implies its format.
struct FormatFlags {
  struct Given {
    tensorseal::Format format;
    const tensorseal::FormatParam* param;
    std::string value;
  };
  std::vector<Given> given;  // in command-line order
};
// Adds one flag per writer option of the format table to a command that writes.
std::shared_ptr<FormatFlags> add_format_flags(CLI::App* cmd);
// The format `to` (kUnknown: none named; `to_name` as the user wrote it), or the one
// the given flags imply; their values, parsed, into `options`. Throws Error
// api/invalid-argument when a flag's format is not `to` (or another flag's), and the
// parser's error for a bad value.
tensorseal::Format apply_format_flags(const FormatFlags& flags, tensorseal::Format to, const std::string& to_name,
                                      tensorseal::FormatOptions& options);

// Prints rows as an aligned table (first row is the header).
void print_table(const std::vector<std::vector<std::string>>& rows, std::FILE* out = stdout);
// The same table, row k made by row(k) when needed (twice: widths, then lines), so that
// a table of 200,000 rows is never held whole.
void print_table(std::size_t n, const std::function<std::vector<std::string>(std::size_t)>& row,
                 std::FILE* out = stdout);

}  // namespace tseal
