// Validating tar reader (src/tar/reader.cc, docs/formats/tar.md): the members of a
// ustar, GNU or pax archive, named and sized exactly as Python's tarfile names and
// sizes them, or an Error. Used by the torch tar format (src/torch/tar_reader.cc) and by
// scan (src/tools/scan_file.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/limits.h"

namespace tensorseal::detail::tar {

struct Member {
  std::string name;             // as tarfile gives it (long name, pax path or prefix/name)
  std::uint64_t header_offset;  // first byte of its first header (an extension header's, if any)
  std::uint64_t data_offset;    // first byte of its data (a hard link: its target's)
  std::uint64_t size;           // bytes of data (a hard link: its target's)
  // A hard link: index of the earlier member whose data tarfile gives for it (resolved
  // through links), and the target's name as written.
  bool hard_link = false;
  std::size_t target = 0;
  std::string link_name;
};

// Which header dialects an archive uses (for facts): any ustar magic, GNU magic, pax
// extended headers, GNU long names.
struct Dialect {
  bool ustar = false, gnu = false, pax = false, gnu_long_names = false;
  std::string text() const;  // "ustar", "gnu+long-names", "ustar+pax", ...
};

struct Archive {
  std::vector<Member> members;  // in archive order
  Dialect dialect;
  std::uint64_t end = 0;  // offset of the end-of-archive block
};

// Whether `head` opens with a block tarfile accepts as a first header (else torch.load
// reads the file as a pickle): not all zero, every number field parses as tarfile
// parses it, and the checksum equals the unsigned or signed sum of the block. Never
// throws.
bool looks_like_tar(std::span<const std::byte> head) noexcept;

// Walks the archive in `file` (all its bytes), calling `visit` with each member and its
// data (a hard link: its target's) in archive order, as soon as the member's headers
// are validated: members before a malformed header are visited before the error is
// thrown. Checks every rule of tar/constants.h; `name` and the offsets go into errors.
// Returns the members (as read() does).
Archive walk(std::span<const std::byte> file, const std::string& name, const Limits& limits,
             const std::function<void(const Member&, std::span<const std::byte> data)>& visit);

// walk() collecting the members.
[[nodiscard]] Archive read(std::span<const std::byte> file, const std::string& name, const Limits& limits);

}  // namespace tensorseal::detail::tar
