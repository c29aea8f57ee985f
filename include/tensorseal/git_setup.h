// tensorseal/git_setup.h — installing tensorseal as git's diff driver and clean filter
// for checkpoints (`tseal git-setup`, docs/cli.md):
//
//   attributes:  *.pt diff=tseal filter=tseal   (and .pth .bin .ckpt .safetensors)
//   config:      diff.tseal.textconv = tseal inspect --textconv
//                filter.tseal.clean  = tseal canon --stdin --stdout
//
// The diff driver makes `git diff` / `git log -p` show which tensors changed; the clean
// filter stores the canonical bytes, so re-saving unchanged weights changes nothing.
// No smudge filter: the canonical file is what a checkout gives. A file the filter
// cannot read (not a checkpoint, or refused as dangerous) is stored as it is: git uses
// the original bytes when a filter that is not `required` fails.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tensorseal/error.h"
#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

namespace rules {
// git could not be run or failed (not a repository, no git on PATH, ...).
inline constexpr Rule kGitCommand{"git/command-failed", ErrorKind::kIo};
}  // namespace rules

// The attribute lines git_setup installs, in order.
[[nodiscard]] std::vector<std::string> git_attribute_lines();
// The config entries (key, value) git_setup sets, in order.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> git_config_entries();

struct GitSetupOptions {
  // false: this repository (found from `directory`): its top-level .gitattributes and
  // `git config --local`. true: the user's global attributes file (core.attributesFile,
  // else $XDG_CONFIG_HOME/git/attributes, else ~/.config/git/attributes) and
  // `git config --global`.
  bool global = false;
  std::filesystem::path directory = ".";  // where git runs
};

struct GitSetupReport {
  std::string scope;                                        // "local" or "global"
  std::filesystem::path attributes_file;                    // the file the lines are in
  std::vector<std::string> added_lines;                     // lines appended (those already there are not repeated)
  std::vector<std::pair<std::string, std::string>> config;  // entries set (git_config_entries)
};

// Installs the attributes (appending only missing lines, atomically) and the config.
// Idempotent. Throws Error kGitCommand when git fails (e.g. not inside a repository
// without `global`), and the I/O rules when the attributes file cannot be written.
[[nodiscard]] GitSetupReport git_setup(const GitSetupOptions& options = {});

}  // namespace tensorseal
TENSORSEAL_API_END
