// Shared pieces of the tseal commands. The CLI uses only the public API.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include <tensorseal/tensorseal.h>

namespace tseal {

// Exit statuses, like diff/cmp: 0 success/equal, 1 different/findings, 2 error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDifferent = 1;
inline constexpr int kExitError = 2;

// A registered subcommand: `setup` adds its options to the app and returns the
// function to run when the subcommand was chosen.
using Runner = std::function<int()>;
using Command = std::function<Runner(CLI::App& app)>;

Runner add_inspect(CLI::App& app);
Runner add_hash(CLI::App& app);
Runner add_scan(CLI::App& app);
Runner add_canon(CLI::App& app);
Runner add_convert(CLI::App& app);
Runner add_diff(CLI::App& app);
Runner add_explain(CLI::App& app);
Runner add_verify(CLI::App& app);

// Prints rows as an aligned table (first row is the header).
void print_table(const std::vector<std::vector<std::string>>& rows, std::FILE* out = stdout);

}  // namespace tseal
