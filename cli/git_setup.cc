// tseal git-setup [--global]: installs tensorseal as git's diff driver and clean filter
// for checkpoints (tensorseal::git_setup): attribute lines in the repository's
// .gitattributes (or the global attributes file) and `git config` entries. Prints
// what it set; exit 0, or 2 when git fails (e.g. not inside a repository).
#include "common.h"

namespace tseal {

Runner add_git_setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("git-setup", "Make git diff checkpoints by tensor and store them canonically");
  auto global = std::make_shared<bool>(false);
  cmd->add_flag("--global", *global, "for every repository of this user (global attributes file, git config --global)");
  return [=]() {
    using namespace tensorseal;
    GitSetupOptions o;
    o.global = *global;
    const GitSetupReport r = git_setup(o);
    const std::string attrs = r.attributes_file.string();
    if (r.added_lines.empty()) std::printf("%s: already has every line\n", attrs.c_str());
    for (const auto& line : r.added_lines) std::printf("%s: added %s\n", attrs.c_str(), line.c_str());
    for (const auto& [key, value] : r.config)
      std::printf("git config --%s %s '%s'\n", r.scope.c_str(), key.c_str(), value.c_str());
    return kExitOk;
  };
}

}  // namespace tseal
