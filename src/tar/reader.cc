// Validating tar reader. Grammar (docs/formats/tar.md; POSIX.1-2008 ustar and pax, GNU
// tar; CPython Lib/tarfile.py, the reader torch.load uses):
//
//   archive   = member* zero-block zero-bytes*       the file ends inside the zeros
//   member    = extension* header data padding       at most one x, one L, one K
//   extension = header(type x) pax-records padding   the next member's path/linkpath/size
//             | header(type L) name NUL* padding     GNU: the next member's name
//             | header(type K) name NUL* padding     GNU: the next member's link target
//   header    = 512 bytes, fields at tar/constants.h offsets; checksum = sum of the
//               bytes with the checksum field read as spaces (unsigned or signed)
//   header.typeflag = '0' | NUL (regular file) | '1' (hard link, size 0) | x | L | K
//   header.magic    = "ustar\0" "00" (ustar, pax) | "ustar  \0" (GNU)
//   number    = ' '* octal-digit* ' '* (NUL then NUL or ' ')*  |  0x80|0xFF base-256
//   pax-records = { decimal-length ' ' keyword '=' value '\n' }, tiling the data
//   padding   = NUL bytes up to the next multiple of 512
//
// A member's name is, as tarfile computes it: the GNU long name or pax path if given,
// else prefix '/' name (ustar prefix field) or name; each cut at its first NUL. Every
// name and link target must be a plain relative path (no '.', '..' or empty component,
// no leading '/'), so tarfile's os.path.normpath lookups and plain byte equality agree.
// A hard link's data is that of the earlier member it names: what tarfile's
// extractfile() and extract() give for it.
#include "tar/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "tar/constants.h"
#include "tensorseal/error.h"
#include "util/checked.h"
#include "util/text.h"

namespace tensorseal::detail::tar {

namespace {

using u64 = std::uint64_t;
using Bytes = std::span<const std::byte>;

std::string_view as_text(Bytes b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

std::string_view header_field(std::string_view header, Field f) { return header.substr(f.offset, f.length); }

// tarfile's nts(): the bytes before the first NUL.
std::string_view until_nul(std::string_view s) { return s.substr(0, std::min(s.find('\0'), s.size())); }

bool python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

// What tarfile's nti() makes of a number field, or nullopt where it raises: base-256
// (negative ones as -1, values past 2^48, which no header sum reaches, as 2^48),
// or the ASCII text before the first NUL read by Python's int(text.strip() or "0", 8)
// (sign, "0o" prefix and underscores between digits included). Only detection uses it;
// walk() accepts a strict subset (parse_number).
std::optional<std::int64_t> python_nti(std::string_view f) {
  const auto first = static_cast<unsigned char>(f[0]);
  if (first == kBase256Negative) return -1;
  if (first == kBase256Positive) {
    std::int64_t v = 0;
    for (std::size_t i = 1; i < f.size(); ++i)
      v = std::min<std::int64_t>((v << 8) | static_cast<unsigned char>(f[i]), std::int64_t{1} << 48);  // saturated
    return v;
  }
  std::string_view s = until_nul(f);
  if (std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
    return std::nullopt;
  while (!s.empty() && python_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && python_space(s.back())) s.remove_suffix(1);
  if (s.empty()) return 0;
  bool negative = false;
  if (s.front() == '+' || s.front() == '-') {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  bool underscore_ok = false;  // Python allows one '_' after the prefix and between digits
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    s.remove_prefix(2);
    underscore_ok = true;
  }
  std::int64_t v = 0;
  bool digits = false, last_underscore = false;
  for (char c : s) {
    if (c == '_') {
      if (!underscore_ok || last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    if (c < '0' || c > '7' || v > (std::int64_t{1} << 40)) return std::nullopt;
    v = v * 8 + (c - '0');
    digits = true;
    last_underscore = false;
    underscore_ok = true;
  }
  if (!digits || last_underscore) return std::nullopt;
  return negative ? -v : v;
}

// The header's checksums as tarfile computes them: the block summed as unsigned and
// as signed chars, the checksum field counted as eight spaces.
std::pair<std::int64_t, std::int64_t> checksums(std::string_view h) {
  std::int64_t unsigned_sum = kChecksumSpaces, signed_sum = kChecksumSpaces;
  for (u64 i = 0; i < kBlock; ++i) {
    if (i >= kChecksum.offset && i < kChecksum.offset + kChecksum.length) continue;
    unsigned_sum += static_cast<unsigned char>(h[i]);
    signed_sum += static_cast<signed char>(h[i]);
  }
  return {unsigned_sum, signed_sum};
}

// A number field read strictly: octal digits between spaces, then only NULs and
// spaces; or base-256. A subset of what tarfile's nti() and GNU tar accept, so both
// read the same value.
struct Number {
  enum { kOk, kNegative, kInvalid } status = kInvalid;
  u64 value = 0;
};
Number parse_number(std::string_view f) {
  const auto first = static_cast<unsigned char>(f[0]);
  if (first == kBase256Negative) return {Number::kNegative, 0};  // tarfile: -(256^(n-1) - rest) < 0
  if (first == kBase256Positive) {
    u64 v = 0;
    for (std::size_t i = 1; i < f.size(); ++i) {
      if (v >> 55) return {};  // past 2^63
      v = (v << 8) | static_cast<unsigned char>(f[i]);
    }
    return {Number::kOk, v};
  }
  std::size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  u64 v = 0;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) v = v * 8 + static_cast<u64>(f[i] - '0');  // <= 36 bits
  while (i < f.size() && f[i] == ' ') ++i;
  if (i < f.size() && f[i] != '\0') return {};
  for (; i < f.size(); ++i)
    if (f[i] != '\0' && f[i] != ' ') return {};
  return {Number::kOk, v};
}

// What a pax header or GNU long-name header says about the member that follows.
struct Pending {
  u64 first_offset = 0;  // the first extension header's offset
  bool any = false, pax = false, long_name = false, long_link = false;
  std::optional<std::string> path, linkpath, name, link;
  std::optional<u64> size;
  u64 path_at = 0, linkpath_at = 0, name_at = 0, link_at = 0, size_at = 0;
};

class Walker {
 public:
  Walker(Bytes file, const std::string& name, const Limits& limits) : file_(file), name_(name), limits_(limits) {}

  Archive run(const std::function<void(const Member&, Bytes)>& visit) {
    u64 pos = 0;
    for (;;) {
      if (file_.size() - pos < kBlock) {
        if (pending_.any) fail(rules::kTruncated, pos, "the file ends after an extension header, before its member");
        fail(rules::kTruncated, pos,
             pos == file_.size() ? "the archive ends without an end-of-archive block (512 zero bytes)"
                                 : fmt::format("the file ends {} bytes into a header block", file_.size() - pos));
      }
      const std::string_view h = as_text(file_.subspan(pos, kBlock));
      if (std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; })) {
        finish(pos);
        return std::move(archive_);
      }
      pos = header(pos, h, visit);
    }
  }

 private:
  [[noreturn]] void fail(Rule rule, u64 at, const std::string& detail) const { throw Error(rule, detail, name_, at); }

  // The end-of-archive block at `pos`: nothing may be pending, and only zero bytes
  // may follow (tarfile stops reading at the first zero block).
  void finish(u64 pos) {
    if (pending_.any)
      fail(pending_.pax ? rules::kBadPax : rules::kBadLongName, pending_.first_offset,
           "an extension header is not followed by a member");
    const auto rest = file_.subspan(pos);
    const auto nonzero = std::find_if(rest.begin(), rest.end(), [](std::byte b) { return b != std::byte{0}; });
    if (nonzero != rest.end())
      fail(rules::kTrailingData, pos + static_cast<u64>(nonzero - rest.begin()),
           "bytes other than zero follow the end-of-archive block");
    archive_.end = pos;
  }

  // Validates the header at `pos` and what follows it; returns the next header's offset.
  u64 header(u64 pos, std::string_view h, const std::function<void(const Member&, Bytes)>& visit) {
    const auto stored = parse_number(header_field(h, kChecksum));
    const auto [unsigned_sum, signed_sum] = checksums(h);
    if (stored.status != Number::kOk)
      fail(rules::kBadNumber, pos + kChecksum.offset, "the header checksum is not an octal number");
    if (static_cast<std::int64_t>(stored.value) != unsigned_sum &&
        static_cast<std::int64_t>(stored.value) != signed_sum)
      fail(rules::kBadChecksum, pos + kChecksum.offset,
           fmt::format("header checksum {} is neither the unsigned ({}) nor the signed ({}) sum of the header",
                       stored.value, unsigned_sum, signed_sum));
    for (const Field f : kNumericFields)
      if (parse_number(header_field(h, f)).status == Number::kInvalid)
        fail(rules::kBadNumber, pos + f.offset,
             fmt::format("header field at +{} is not an octal or base-256 number", f.offset));
    const std::string_view magic = header_field(h, kMagic);
    const bool gnu = magic == kGnuMagic;
    if (!gnu && magic != kUstarMagic)
      fail(rules::kBadMagic, pos + kMagic.offset,
           fmt::format("header magic {} is neither ustar nor GNU (pre-POSIX archives are not read)",
                       util::quoted(magic)));
    (gnu ? archive_.dialect.gnu : archive_.dialect.ustar) = true;

    const char type = h[kTypeflag.offset];
    const Number size_field = parse_number(header_field(h, kSize));
    if (size_field.status == Number::kNegative)
      fail(rules::kNegativeSize, pos + kSize.offset, "the size field is a negative base-256 number");
    const u64 data = pos + kBlock;
    switch (type) {
      case kPaxHeader:
        return extension(pos, data, size_field.value, true, false);
      case kGnuLongName:
        return extension(pos, data, size_field.value, false, false);
      case kGnuLongLink:
        return extension(pos, data, size_field.value, false, true);
      case kRegular:
      case kRegularOld:
      case kHardLink:
        break;
      default:
        fail(rules::kUnsupportedType, pos + kTypeflag.offset,
             fmt::format("member type {} is not a regular file, hard link or extension header "
                         "(symbolic links, directories, devices, sparse files and pax global headers are refused)",
                         util::quoted(std::string_view(&h[kTypeflag.offset], 1))));
    }
    return member(pos, h, data, gnu, type == kHardLink, size_field.value, visit);
  }

  // The `size` bytes of data at `data` and the padding after them: inside the file,
  // padding zero. Returns the next header's offset.
  u64 data_run(u64 header_at, u64 data, u64 size) const {
    const u64 padded = size % kBlock == 0 ? size : size + (kBlock - size % kBlock);
    if (size > file_.size() - data || padded > file_.size() - data)
      fail(rules::kTruncated, header_at + kSize.offset,
           fmt::format("member data of {} bytes runs past the end of the file", size));
    const auto pad = file_.subspan(data + size, padded - size);
    const auto nonzero = std::find_if(pad.begin(), pad.end(), [](std::byte b) { return b != std::byte{0}; });
    if (nonzero != pad.end())
      fail(rules::kTrailingData, data + size + static_cast<u64>(nonzero - pad.begin()),
           "bytes other than zero in the padding after member data");
    return data + padded;
  }

  void begin_extension(u64 pos) {
    if (!pending_.any) pending_.first_offset = pos;
    pending_.any = true;
  }

  // A pax extended header (`pax`) or GNU long name/link header.
  u64 extension(u64 pos, u64 data, u64 size, bool pax, bool link) {
    begin_extension(pos);
    if (pax) {
      if (pending_.pax) fail(rules::kBadPax, pos, "two pax extended headers for one member");
      if (size > kMaxPaxSize)
        fail(rules::kBadPax, pos + kSize.offset,
             fmt::format("pax extended header of {} bytes (at most {})", size, kMaxPaxSize));
      const u64 next = data_run(pos, data, size);
      pending_.pax = archive_.dialect.pax = true;
      pax_records(data, as_text(file_.subspan(data, size)));
      return next;
    }
    bool& seen = link ? pending_.long_link : pending_.long_name;
    if (seen) fail(rules::kBadLongName, pos, "two GNU long-name headers of one kind for one member");
    seen = archive_.dialect.gnu_long_names = true;
    if (size > kMaxNameLength + 1)
      fail(rules::kBadLongName, pos + kSize.offset,
           fmt::format("GNU long name of {} bytes (at most {})", size, kMaxNameLength));
    const u64 next = data_run(pos, data, size);
    const std::string_view s = as_text(file_.subspan(data, size));
    const std::string_view value = until_nul(s);
    if (s.find_first_not_of('\0', value.size()) != std::string_view::npos)
      fail(rules::kBadLongName, data + value.size(), "a GNU long name holds bytes after its terminating NUL");
    (link ? pending_.link : pending_.name) = std::string(value);
    (link ? pending_.link_at : pending_.name_at) = data;
    conflicts();
    return next;
  }

  // The records of a pax extended header's data `s` (at file offset `base`).
  void pax_records(u64 base, std::string_view s) {
    std::size_t at = 0;
    std::map<std::string_view, bool> seen;
    while (at < s.size()) {
      const u64 record_at = base + at;
      std::size_t i = at;
      u64 length = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - at < 20) length = length * 10 + (s[i++] - '0');
      if (i == at || i >= s.size() || s[i] != ' ' || length == 0 || length > s.size() - at)
        fail(rules::kBadPax, record_at,
             "a pax record does not start with its length and a space, or runs past "
             "the header");
      const std::string_view record = s.substr(at, length);
      const std::size_t key_at = i - at + 1, eq = record.find('=', key_at);
      if (record.back() != '\n' || eq == std::string_view::npos || eq == key_at)
        fail(rules::kBadPax, record_at, "a pax record is not 'length keyword=value\\n'");
      const std::string_view key = record.substr(key_at, eq - key_at);
      const std::string_view value = record.substr(eq + 1, record.size() - eq - 2);
      if (seen[key]) fail(rules::kBadPax, record_at, fmt::format("pax keyword {} given twice", util::quoted(key)));
      seen[key] = true;
      const u64 value_at = record_at + eq + 1;
      if (key == kPaxPath) {
        pending_.path = std::string(value);
        pending_.path_at = value_at;
      } else if (key == kPaxLinkpath) {
        pending_.linkpath = std::string(value);
        pending_.linkpath_at = value_at;
      } else if (key == kPaxSize) {
        // tarfile reads int(value) and takes 0 when that fails: only plain digits agree.
        if (value.empty() || value.size() > 18 ||
            !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
          fail(rules::kBadPax, value_at, fmt::format("pax size {} is not a decimal number", util::quoted(value)));
        u64 v = 0;
        for (char c : value) v = v * 10 + static_cast<u64>(c - '0');
        pending_.size = v;
        pending_.size_at = value_at;
      } else if (std::find(std::begin(kPaxIgnored), std::end(kPaxIgnored), key) == std::end(kPaxIgnored)) {
        fail(rules::kBadPax, record_at, fmt::format("pax keyword {} is not one tensorseal reads", util::quoted(key)));
      }
      at += length;
    }
    conflicts();
  }

  // A GNU long name and a pax path (or long link and linkpath) for one member: tarfile
  // takes whichever header comes first, GNU tar the other.
  void conflicts() const {
    if ((pending_.name && pending_.path) || (pending_.link && pending_.linkpath))
      fail(rules::kBadLongName, pending_.first_offset, "a member named by both a GNU long name and a pax record");
  }

  void check_name(std::string_view n, u64 at, const char* what) const {
    if (n.empty()) fail(rules::kUnsafeName, at, fmt::format("empty {}", what));
    if (n.size() > kMaxNameLength)
      fail(rules::kUnsafeName, at, fmt::format("{} of {} bytes (at most {})", what, n.size(), kMaxNameLength));
    if (n.front() == '/') fail(rules::kUnsafeName, at, fmt::format("absolute {} {}", what, util::quoted(n)));
    for (std::size_t b = 0;;) {
      const std::size_t e = std::min(n.find('/', b), n.size());
      const std::string_view part = n.substr(b, e - b);
      if (part.empty() || part == "." || part == "..")
        fail(rules::kUnsafeName, at,
             fmt::format("{} {} has an empty, '.' or '..' component (only plain relative paths are read)", what,
                         util::quoted(n)));
      if (e == n.size()) break;
      b = e + 1;
    }
  }

  u64 member(u64 pos, std::string_view h, u64 data, bool gnu, bool link, u64 header_size,
             const std::function<void(const Member&, Bytes)>& visit) {
    const std::string_view prefix = until_nul(header_field(h, kPrefix));
    if (gnu && !prefix.empty())
      fail(rules::kAmbiguousPrefix, pos + kPrefix.offset,
           "a GNU header with a ustar prefix: tarfile prepends it to the name, GNU tar does not");
    Member m;
    m.header_offset = pending_.any ? pending_.first_offset : pos;
    u64 name_at = pos + kName.offset;
    if (pending_.name) {
      m.name = *pending_.name;
      name_at = pending_.name_at;
    } else if (pending_.path) {
      m.name = *pending_.path;
      name_at = pending_.path_at;
    } else {
      const std::string_view base = until_nul(header_field(h, kName));
      m.name = prefix.empty() ? std::string(base) : std::string(prefix) + "/" + std::string(base);
      if (!prefix.empty()) name_at = pos + kPrefix.offset;
    }
    check_name(m.name, name_at, "member name");
    u64 size = header_size;
    if (pending_.size) {
      if (header_size != 0 && header_size != *pending_.size)
        fail(rules::kPaxSizeMismatch, pos + kSize.offset,
             fmt::format("the header says {} bytes, its pax record {} (tarfile takes the pax size, older tars the "
                         "header's)",
                         header_size, *pending_.size));
      size = *pending_.size;
    }
    if (by_name_.count(m.name))
      fail(rules::kDuplicateMember, m.header_offset,
           fmt::format("member {} appears twice (tarfile reads the last, other tars the first)", util::quoted(m.name)));
    u64 next = data;
    if (link) {
      if (size != 0)
        fail(rules::kBadLink, pos + kSize.offset,
             fmt::format("hard link {} declares {} bytes of data (tarfile skips none)", util::quoted(m.name), size));
      u64 link_at = pos + kLinkname.offset;
      if (pending_.link) {
        m.link_name = *pending_.link;
        link_at = pending_.link_at;
      } else if (pending_.linkpath) {
        m.link_name = *pending_.linkpath;
        link_at = pending_.linkpath_at;
      } else {
        m.link_name = std::string(until_nul(header_field(h, kLinkname)));
      }
      check_name(m.link_name, link_at, "hard link target");
      const auto target = by_name_.find(m.link_name);
      if (target == by_name_.end())
        fail(rules::kBadLink, link_at,
             fmt::format("hard link {} names {}, which is not an earlier member", util::quoted(m.name),
                         util::quoted(m.link_name)));
      const Member& t = archive_.members[target->second];
      m.hard_link = true;
      m.target = t.hard_link ? t.target : target->second;
      m.data_offset = t.data_offset;
      m.size = t.size;
    } else {
      m.data_offset = data;
      m.size = size;
      next = data_run(pos, data, size);
    }
    if (archive_.members.size() >= limits_.max_entries)
      fail(rules::kTooManyMembers, m.header_offset,
           fmt::format("more than max_entries ({}) members", limits_.max_entries));
    by_name_.emplace(m.name, archive_.members.size());
    archive_.members.push_back(std::move(m));
    pending_ = Pending{};
    const Member& added = archive_.members.back();
    if (visit) visit(added, file_.subspan(added.data_offset, added.size));
    return next;
  }

  Bytes file_;
  const std::string& name_;
  const Limits& limits_;
  Archive archive_;
  Pending pending_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace

std::string Dialect::text() const {
  std::string out = gnu && !ustar ? "gnu" : ustar && !gnu ? "ustar" : "ustar+gnu";
  if (pax) out += "+pax";
  if (gnu_long_names) out += "+long-names";
  return out;
}

bool looks_like_tar(std::span<const std::byte> head) noexcept {
  if (head.size() < kBlock) return false;
  const std::string_view h = as_text(head.first(kBlock));
  if (std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; })) return false;
  // tarfile raises (and torch.load falls back to reading a pickle) when the first
  // header's checksum or any number field does not parse.
  for (const Field f : kNumericFields)
    if (!python_nti(header_field(h, f))) return false;
  const auto stored = python_nti(header_field(h, kChecksum));
  const auto [unsigned_sum, signed_sum] = checksums(h);
  return *stored == unsigned_sum || *stored == signed_sum;
}

Archive walk(std::span<const std::byte> file, const std::string& name, const Limits& limits,
             const std::function<void(const Member&, std::span<const std::byte>)>& visit) {
  return Walker(file, name, limits).run(visit);
}

Archive read(std::span<const std::byte> file, const std::string& name, const Limits& limits) {
  return walk(file, name, limits, {});
}

}  // namespace tensorseal::detail::tar
