// A directory written atomically as a whole: its files are written into a temp
// directory beside the target (".<name>.tseal-tmp.<pid>.<random>"), each fsynced;
// commit() fsyncs the temp directory and renames it into place, swapping it with an
// existing target in one step (renameat2 RENAME_EXCHANGE) and then removing the old
// one. A reader sees the old directory or the new one, never a mixture; a killed
// writer leaves only a temp directory, which the next write to the same target removes.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace tensorseal::detail::io {

// Makes the finished directory `temp` appear at `target` in one step: fsyncs `temp`
// (when `fsync`), swaps it with an existing `target` (renameat2 RENAME_EXCHANGE, after
// `check_replace(target)` allowed it) and removes the old tree, or renames it into
// place; then fsyncs the parent. Throws io/write.
void swap_into_place(const std::filesystem::path& temp, const std::filesystem::path& target, bool fsync,
                     const std::function<void(const std::filesystem::path& existing)>& check_replace);
// Writes nothing; fsyncs directory `p`. Throws io/write.
void fsync_directory(const std::filesystem::path& p);

class AtomicDirectory {
 public:
  // `may_replace(existing)` decides whether an existing directory at `target` may be
  // replaced; it is asked in commit(), and refusing throws its own error.
  AtomicDirectory(std::filesystem::path target, bool fsync,
                  std::function<void(const std::filesystem::path& existing)> check_replace);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  // Where to write file `name` before commit().
  std::filesystem::path file(const std::string& name) const { return temp_ / name; }
  void commit();

 private:
  std::filesystem::path target_, temp_;
  bool fsync_ = true;
  bool committed_ = false;
  std::function<void(const std::filesystem::path&)> check_replace_;
};

}  // namespace tensorseal::detail::io
