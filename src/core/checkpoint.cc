// Format detection (by content only) and dispatch to the per-format readers.
#include "tensorseal/checkpoint.h"

#include <cstring>

#include "io/input.h"
#include "tensorseal/error.h"
#include "util/endian.h"

namespace tensorseal {

std::string_view format_name(Format f) noexcept {
  switch (f) {
    case Format::kTorchZip: return "torch-zip";
    case Format::kTorchLegacy: return "torch-legacy";
    case Format::kPickle: return "pickle";
    case Format::kSafetensors: return "safetensors";
    case Format::kNpy: return "npy";
    case Format::kNpz: return "npz";
    case Format::kUnknown: break;
  }
  return "unknown";
}

std::optional<Format> format_from_name(std::string_view n) noexcept {
  for (Format f : {Format::kTorchZip, Format::kTorchLegacy, Format::kPickle, Format::kSafetensors,
                   Format::kNpy, Format::kNpz})
    if (format_name(f) == n) return f;
  if (n == "pt") return Format::kTorchZip;
  return std::nullopt;
}

namespace {

bool starts_with(std::span<const std::byte> b, std::string_view magic) {
  return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
}

// The legacy torch format opens with the pickled magic number 0x1950a86a20f9469cfc6c
// (protocol 2: PROTO 2, LONG1 of 10 bytes).
constexpr std::string_view kLegacyMagicPickle{"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14};

// safetensors: u64 header length, then a JSON object. The length itself is not
// trusted here (the reader checks it and names the rule), only the '{'.
bool looks_like_safetensors(std::span<const std::byte> b) {
  if (b.size() < 9) return false;
  const std::uint64_t n = util::load_le<std::uint64_t>(b.data());
  const std::uint64_t window = std::min<std::uint64_t>({b.size(), 8 + std::max<std::uint64_t>(n, 1), 8 + 4096});
  for (std::size_t i = 8; i < window; ++i) {
    char c = static_cast<char>(b[i]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

bool zip_first_entry_is_npy(std::span<const std::byte> b) {
  // Local file header: name length at 26, extra length at 28, name at 30.
  if (b.size() < 30) return false;
  const std::uint16_t name_len = util::load_le<std::uint16_t>(b.data() + 26);
  if (b.size() < 30u + name_len) return false;
  std::string_view name(reinterpret_cast<const char*>(b.data() + 30), name_len);
  return name.ends_with(".npy");
}

}  // namespace

Format detect_format(std::span<const std::byte> b) noexcept {
  if (starts_with(b, "PK\x03\x04")) return zip_first_entry_is_npy(b) ? Format::kNpz : Format::kTorchZip;
  // A zip with no entries at all is only an end record: what np.savez() writes with
  // no arrays (torch never writes an empty archive).
  if (starts_with(b, "PK\x05\x06")) return Format::kNpz;
  if (starts_with(b, "\x93NUMPY")) return Format::kNpy;
  if (starts_with(b, kLegacyMagicPickle)) return Format::kTorchLegacy;
  if (looks_like_safetensors(b)) return Format::kSafetensors;
  if (!b.empty() && static_cast<unsigned char>(b[0]) == 0x80 && b.size() > 1 &&
      static_cast<unsigned char>(b[1]) <= 5)
    return Format::kPickle;
  // Protocol 0/1 pickles start with an opcode such as MARK, EMPTY_* or GLOBAL.
  if (!b.empty() && std::strchr("(]})cNIFLSVXUTJKMG\x8c\x95", static_cast<char>(b[0])) != nullptr &&
      b[0] != std::byte{0})
    return Format::kPickle;
  return Format::kUnknown;
}

namespace detail {
Checkpoint read_input(const Input& in) {
  switch (detect_format(in.bytes())) {
    case Format::kSafetensors: return read_safetensors(in);
    case Format::kTorchZip: return read_torch_zip(in);
    case Format::kTorchLegacy: return read_torch_legacy(in);
    case Format::kPickle: return read_pickle_file(in);
    case Format::kNpy: return read_npy(in);
    case Format::kNpz: return read_npz(in);
    case Format::kUnknown: break;
  }
  throw Error(rules::kUnknownFormat,
              "not a checkpoint tensorseal knows (torch zip/legacy, pickle, safetensors, npy, npz)", in.name, 0);
}
}  // namespace detail

Checkpoint read_mapped(std::shared_ptr<const MappedFile> file, const ReadOptions& options) {
  Checkpoint c = detail::read_input(detail::input_of(file, options));
  c.file = file->path();
  c.mapping = std::move(file);
  return c;
}

Checkpoint read_file(const std::filesystem::path& path, const ReadOptions& options) {
  return read_mapped(MappedFile::open(path), options);
}

Checkpoint read_bytes(std::span<const std::byte> bytes, std::string name, const ReadOptions& options) {
  detail::Input in;
  in.name = name;
  in.whole = Storage::owned(std::vector<std::byte>(bytes.begin(), bytes.end()));
  in.options = &options;
  Checkpoint c = detail::read_input(in);
  c.file = std::move(name);
  return c;
}

}  // namespace tensorseal
