// git_setup: the attributes and config of tensorseal's git diff driver and clean
// filter (tensorseal/git_setup.h). git is run as a child process (posix_spawnp, no
// shell); the attributes file is rewritten atomically.
#include "tensorseal/git_setup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/sink.h"

extern char** environ;

namespace tensorseal {
namespace {

constexpr const char* kExtensions[] = {"pt", "pth", "bin", "ckpt", "safetensors"};

struct GitResult {
  int status = -1;  // exit status
  std::string out;  // stdout, then stderr
};

// Runs `git -C dir args...`, collecting its output (stdout and stderr together).
GitResult run_git(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s{"git", "-C", dir.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) throw Error(rules::kGitCommand, std::string("cannot create a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, "git", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw Error(rules::kGitCommand, std::string("cannot run git: ") + std::strerror(rc));
  }
  GitResult r;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0)
      r.out.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return r;
}

// git's output, or Error naming the command and git's first line of complaint.
std::string git_or_throw(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  GitResult r = run_git(dir, args);
  if (r.status != 0) {
    std::string cmd = "git";
    for (const auto& a : args) cmd += " " + a;
    std::string why = r.out.substr(0, r.out.find('\n'));
    throw Error(rules::kGitCommand, fmt::format("'{}' failed (exit {}): {}", cmd, r.status, why), dir.string());
  }
  while (!r.out.empty() && (r.out.back() == '\n' || r.out.back() == '\r')) r.out.pop_back();
  return r.out;
}

std::filesystem::path home() {
  const char* h = std::getenv("HOME");
  if (h == nullptr || *h == '\0')
    throw Error(rules::kGitCommand, "HOME is not set; cannot find the global attributes file");
  return h;
}

// The global attributes file as git finds it (git-config(1), core.attributesFile).
std::filesystem::path global_attributes(const std::filesystem::path& dir) {
  const GitResult r = run_git(dir, {"config", "--global", "--get", "core.attributesFile"});
  std::string v = r.status == 0 ? r.out.substr(0, r.out.find('\n')) : std::string();
  if (!v.empty()) {
    if (v.starts_with("~/")) return home() / v.substr(2);
    return v;
  }
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x != '\0')
    return std::filesystem::path(x) / "git" / "attributes";
  return home() / ".config" / "git" / "attributes";
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(rules::kIoRead, "cannot read", p.string());
  return s.str();
}

}  // namespace

std::vector<std::string> git_attribute_lines() {
  std::vector<std::string> out;
  for (const char* e : kExtensions) out.push_back(std::string("*.") + e + " diff=tseal filter=tseal");
  return out;
}

std::vector<std::pair<std::string, std::string>> git_config_entries() {
  return {{"diff.tseal.textconv", "tseal inspect --textconv"}, {"filter.tseal.clean", "tseal canon --stdin --stdout"}};
}

GitSetupReport git_setup(const GitSetupOptions& o) {
  GitSetupReport r;
  r.scope = o.global ? "global" : "local";
  r.attributes_file =
      o.global ? global_attributes(o.directory)
               : std::filesystem::path(git_or_throw(o.directory, {"rev-parse", "--show-toplevel"})) / ".gitattributes";
  // Attributes: append the lines not yet present (compared line by line, trimmed).
  std::string text = read_text(r.attributes_file);
  std::vector<std::string> have;
  {
    std::istringstream s(text);
    for (std::string line; std::getline(s, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      have.push_back(line);
    }
  }
  for (const auto& line : git_attribute_lines())
    if (std::find(have.begin(), have.end(), line) == have.end()) r.added_lines.push_back(line);
  if (!r.added_lines.empty()) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    for (const auto& line : r.added_lines) text += line + "\n";
    std::error_code ec;
    if (r.attributes_file.has_parent_path()) std::filesystem::create_directories(r.attributes_file.parent_path(), ec);
    detail::io::AtomicFileSink sink(r.attributes_file);
    static_cast<detail::io::Sink&>(sink).write(std::string_view(text));
    sink.commit();
  }
  for (const auto& [key, value] : git_config_entries()) {
    (void)git_or_throw(o.directory, {"config", o.global ? "--global" : "--local", key, value});
    r.config.emplace_back(key, value);
  }
  return r;
}

}  // namespace tensorseal
