// Files named by a directory's own index (shard indexes, DCP storage_data): resolved
// so that no name can reach outside the directory.
#pragma once

#include <filesystem>
#include <string>

#include "tensorseal/error.h"

namespace tensorseal::detail::io {

// True when `p` is `root` or inside it, compared part by part (both canonical).
bool path_inside(const std::filesystem::path& p, const std::filesystem::path& root);

// The on-disk path of `file` (as the index spells it) inside `dir`, refused with
// `escapes` for absolute paths, "." / ".." parts and symlinks (of the file or of a
// folder on the way) resolving outside `dir` (a Hugging Face cache snapshot's links into
// its repository's blobs/ folder count as inside), and with `missing` when it does not
// exist or is not a regular file. Messages call it "<noun> '<file>'" and name `index`.
std::filesystem::path file_inside(const std::filesystem::path& dir, const std::string& file, const Rule& escapes,
                                  const Rule& missing, std::string_view noun, const std::string& index);

}  // namespace tensorseal::detail::io
