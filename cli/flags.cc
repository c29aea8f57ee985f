// Flags shared by the commands: --threads, the limits, and the writers' options.
#include <fmt/format.h>

#include <string>

#include "common.h"

namespace tseal {

std::shared_ptr<unsigned> add_threads(CLI::App* cmd) {
  auto threads = std::make_shared<unsigned>(0);
  cmd->add_option("--threads", *threads, "worker threads (0 = all cores; never changes the result)");
  return threads;
}

std::shared_ptr<tensorseal::Limits> add_limits(CLI::App* cmd) {
  auto limits = std::make_shared<tensorseal::Limits>();
  auto* group = cmd->add_option_group("Limits", "resource limits of the read (docs/limits.md)");
  for (const std::string_view name : tensorseal::limit_names()) {
    std::string flag = "--" + std::string(name);
    for (auto& c : flag)
      if (c == '_') c = '-';
    const std::string help = fmt::format("limit {} (default {})", name, tensorseal::get_limit(*limits, name));
    group->add_option_function<std::uint64_t>(
        flag,
        [limits, name, flag](const std::uint64_t& value) {
          try {
            tensorseal::set_limit(*limits, name, value);
          } catch (const tensorseal::Error& e) {
            throw CLI::ValidationError(flag, e.detail());
          }
        },
        help);
  }
  return limits;
}

std::shared_ptr<tensorseal::Format> add_input_format(CLI::App* cmd) {
  auto format = std::make_shared<tensorseal::Format>(tensorseal::Format::kUnknown);
  cmd->add_option_function<std::string>(
      "--format",
      [format](const std::string& name) {
        const auto f = tensorseal::format_from_name(name);
        if (!f) throw CLI::ValidationError("--format", "unknown format '" + name + "'");
        *format = *f;
      },
      "read the input as this format instead of detecting it (a file that is two formats at once is "
      "refused without it: docs/security.md)");
  return format;
}

std::shared_ptr<FormatFlags> add_format_flags(CLI::App* cmd) {
  auto flags = std::make_shared<FormatFlags>();
  for (const auto& f : tensorseal::formats()) {
    if (!f.writable) continue;
    for (const auto& p : f.params) {
      if (p.flag.empty()) continue;  // a layout canon keeps, not a flag
      const tensorseal::FormatParam* param = &p;
      const tensorseal::Format format = f.format;
      cmd->add_option_function<std::string>(
             "--" + std::string(p.flag),
             [flags, format, param](const std::string& v) {
               flags->given.push_back({format, param, v});
             },
             std::string(p.help))
          ->type_name(std::string(p.value));
    }
  }
  return flags;
}

tensorseal::Format apply_format_flags(const FormatFlags& flags, tensorseal::Format to, const std::string& to_name,
                                      tensorseal::FormatOptions& options) {
  using namespace tensorseal;
  std::string named = to_name;
  for (const auto& g : flags.given) {
    if (to != Format::kUnknown && to != g.format)
      throw Error(rules::kInvalidArgument, "--" + std::string(g.param->flag) + " writes " +
                                               std::string(format_name(g.format)) + ", not " + named);
    to = g.format;
    named = format_name(g.format);
  }
  for (const auto& g : flags.given) set_option(options, g.format, g.param->name, g.value);
  return to;
}

tensorseal::ReadOptions read_options(const tensorseal::Limits& limits, tensorseal::Format format) {
  tensorseal::ReadOptions o;
  o.limits = limits;
  o.format = format;
  return o;
}

}  // namespace tseal
