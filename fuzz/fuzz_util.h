// Shared pieces of the libFuzzer harnesses, also used by tests/cpp/fuzz_regressions_test.cc
// to replay fuzz/regressions/<target>/*: small limits (every input stays cheap, so an
// allocation beyond them is a bug rather than a slow run), the per-target input shaping
// (nested pickle wrapper, safetensors framing) and the round-trip check.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "api/formats.h"
#include "safetensors/format.h"
#include "safetensors/header.h"
#include "tar/reader.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tensorseal/safetensors.h"
#include "tensorseal/scan.h"
#include "tensorseal/write.h"
#include "torch/format.h"

namespace tensorseal::fuzz {

inline ReadOptions small_options() {
  ReadOptions o;
  o.limits.max_safetensors_header = 1 << 20;
  o.limits.max_pickle_bytes = 1 << 22;
  o.limits.max_pickle_ops = 200'000;
  o.limits.max_depth = 200;
  o.limits.max_stack = 50'000;
  o.limits.max_memo = 50'000;
  o.limits.max_string = 1 << 22;
  o.limits.max_alloc = 1 << 25;
  o.limits.max_entries = 10'000;
  o.limits.max_expanded_bytes = 1 << 24;
  return o;
}

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}
inline std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// An Input over a copy of the bytes, as read_bytes builds it, for calling one
// format's reader directly (no detection; nested files go through the dispatch).
inline detail::io::Input input_of(std::span<const std::byte> bytes, const ReadOptions& options) {
  detail::io::Input in;
  in.name = "fuzz";
  in.whole = Storage::owned(std::vector<std::byte>(bytes.begin(), bytes.end()));
  in.options = &options;
  in.read_nested = detail::api::read_input;
  return in;
}

// torch.storage._load_from_bytes(<payload>) as a protocol-4 pickle (what
// pickle.dumps(storage) writes): PROTO 4; SHORT_BINUNICODE x2; STACK_GLOBAL;
// BINBYTES <u32 len> <payload>; TUPLE1; REDUCE; STOP.
inline std::string nested_pickle_of(std::span<const std::byte> payload) {
  std::string p("\x80\x04", 2);
  p += '\x8c';
  p += char(13);
  p += "torch.storage";
  p += '\x8c';
  p += char(16);
  p += "_load_from_bytes";
  p += '\x93';
  p += 'B';
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) p += static_cast<char>((n >> (8 * i)) & 0xff);
  p.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  p += "\x85R.";
  return p;
}

// Input: u16 LE data-buffer length D (<= 4096, else empty result), then the header
// text. Output: a well-framed safetensors file (u64 header length, header, D bytes).
inline std::string safetensors_file_of(std::span<const std::byte> in) {
  if (in.size() < 2) return {};
  const std::size_t d = (static_cast<std::size_t>(in[0]) | (static_cast<std::size_t>(in[1]) << 8)) & 0x1fff;
  if (d > 4096) return {};
  const std::size_t h = in.size() - 2;
  std::string f(8, '\0');
  for (int i = 0; i < 8; ++i) f[i] = static_cast<char>((static_cast<std::uint64_t>(h) >> (8 * i)) & 0xff);
  f.append(reinterpret_cast<const char*>(in.data() + 2), h);
  for (std::size_t i = 0; i < d; ++i) f += static_cast<char>(i * 131 + 7);
  return f;
}

// kRoundTripMismatch: the canonical re-write read back to other content, or (target
// safetensors_index) the two header parsers or the full reader disagreed.
enum class Outcome { kRejected, kAccepted, kRoundTripMismatch };

// Everything an index holds, as text (for comparing the two header parsers).
inline std::string render_index(const SafetensorsIndex& idx) {
  std::string s = "N=" + std::to_string(idx.header_length) + " data@" + std::to_string(idx.data_start) +
                  " pad=" + std::to_string(idx.header_padding) + " meta@" +
                  (idx.metadata_position == SafetensorsIndex::kAbsent ? "-" : std::to_string(idx.metadata_position)) +
                  "\n";
  for (const auto& e : idx.entries) {
    s += "  " + e.name + " " + std::string(name(e.dtype)) + " [";
    for (auto d : e.shape) s += std::to_string(d) + ",";
    s += "] " + std::to_string(e.begin) + ".." + std::to_string(e.end) + "\n";
  }
  for (const auto& [k, v] : idx.metadata) s += "  meta " + k + "=" + v + "\n";
  s += "  by_name";
  for (auto i : idx.by_name) s += " " + std::to_string(i);
  s += "\n  by_offset";
  for (auto i : idx.by_offset) s += " " + std::to_string(i);
  return s;
}

// The safetensors header is read by a fast scanner for the JSON subset writers produce,
// falling back to nlohmann's SAX parser (src/safetensors/header.cc). Both must give the
// same index or the same error, and the full reader must fail exactly when the index
// does, with the same message.
inline Outcome index_agreement(const std::string& file, const ReadOptions& options) {
  auto outcome = [&](bool fast) {
    try {
      return render_index(detail::safetensors::index_safetensors(input_of(as_bytes(file), options), fast));
    } catch (const Error& e) {
      return std::string("error ") + e.what();
    }
  };
  const std::string fast = outcome(true), slow = outcome(false);
  if (fast != slow) return Outcome::kRoundTripMismatch;
  std::string full;
  try {
    (void)detail::safetensors::read_safetensors(input_of(as_bytes(file), options));
  } catch (const Error& e) {
    full = std::string("error ") + e.what();
  }
  const bool index_failed = fast.rfind("error ", 0) == 0;
  // The full reader also restores tensorseal's structure metadata, which may fail on its
  // own (and bound its views' expansion).
  if (index_failed ? full != fast
                   : (!full.empty() && full.find("safetensors/bad-structure") == std::string::npos &&
                      full.find("tensor/expanded-too-large") == std::string::npos))
    return Outcome::kRoundTripMismatch;
  return index_failed ? Outcome::kRejected : Outcome::kAccepted;
}

// Whatever parsed must hash (which walks every element of every view), scan, and,
// when the canonical writer accepts it, read back to the same content.
inline Outcome exercise(const Checkpoint& c, Format write_as, const ReadOptions& options) {
  const std::string h = content_hash(c.root, {HashAlgo::kXxh3, 1});
  (void)scan(c);
  std::string out;
  try {
    WriteOptions w;
    w.threads = 1;
    if (write_as == Format::kSafetensors) w.metadata = c.metadata;
    out = write_bytes(c.root, write_as, w);
  } catch (const Error&) {
    return Outcome::kAccepted;  // not representable in that format (e.g. non-tensor leaves in npz)
  }
  const Checkpoint back = read_bytes(as_bytes(out), "fuzz.out", options);
  return content_hash(back.root, {HashAlgo::kXxh3, 1}) == h ? Outcome::kAccepted : Outcome::kRoundTripMismatch;
}

inline Format family(Format f) {
  return (f == Format::kSafetensors || f == Format::kNpy || f == Format::kNpz) ? f : Format::kTorchZip;
}

// Target dcp: the input split into a .metadata file and one data file (dcp_fuzz.cc),
// written into a directory of this process's own and read as one checkpoint.
inline Outcome run_dcp_target(std::span<const std::byte> data, const ReadOptions& options) {
  if (data.size() < 4) return Outcome::kRejected;
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(data[i]) << (8 * i);
  if (n > data.size() - 4) return Outcome::kRejected;
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("tseal_dcp_fuzz." + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  auto put = [&](const char* name, std::span<const std::byte> bytes) {
    std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  put(".metadata", data.subspan(4, n));
  auto rest = data.subspan(4 + n);
  // Optional tensorseal.dcp manifest: "TSM1", u32 LE length M, M bytes of .tensorseal.json.
  std::error_code ec;
  std::filesystem::remove(dir / ".tensorseal.json", ec);
  if (rest.size() >= 8 && std::memcmp(rest.data(), "TSM1", 4) == 0) {
    std::uint32_t m = 0;
    for (int i = 0; i < 4; ++i) m |= static_cast<std::uint32_t>(rest[4 + i]) << (8 * i);
    if (m > rest.size() - 8) return Outcome::kRejected;
    put(".tensorseal.json", rest.subspan(8, m));
    rest = rest.subspan(8 + m);
  }
  put("__0_0.distcp", rest);
  return exercise(read_file(dir, options), Format::kTorchZip, options);
}

// One input through one of the harnesses in this directory (by target name, without
// "_fuzz"), for the targets that go through the checkpoint readers. Any exception other
// than tensorseal::Error escapes (a bug, as is a sanitizer report).
inline Outcome run_reader_target(std::string_view target, std::span<const std::byte> data) {
  static const ReadOptions options = small_options();
  try {
    if (target == "torch_zip")
      return exercise(detail::torch::read_torch_zip(input_of(data, options)), Format::kTorchZip, options);
    if (target == "torch_legacy")
      return exercise(detail::torch::read_torch_legacy(input_of(data, options)), Format::kTorchZip, options);
    if (target == "tar") {
      // The archive alone (its walk and read() must agree), then as a torch checkpoint.
      std::size_t visited = 0;
      try {
        const auto a = detail::tar::walk(data, "fuzz", options.limits, [&](const auto&, auto) { ++visited; });
        if (a.members.size() != visited || detail::tar::read(data, "fuzz", options.limits).members.size() != visited)
          return Outcome::kRoundTripMismatch;
      } catch (const Error&) {
      }
      return exercise(detail::torch::read_torch_tar(input_of(data, options)), Format::kTorchZip, options);
    }
    if (target == "nested_pickle") {
      if (data.size() > (1u << 22)) return Outcome::kRejected;
      const std::string p = nested_pickle_of(data);
      return exercise(read_bytes(as_bytes(p), "fuzz.pkl", options), Format::kTorchZip, options);
    }
    if (target == "dcp") return run_dcp_target(data, options);
    if (target == "safetensors_index") {
      const std::string f = safetensors_file_of(data);
      return f.empty() ? Outcome::kRejected : index_agreement(f, options);
    }
    if (target == "safetensors_header") {
      const std::string f = safetensors_file_of(data);
      if (f.empty()) return Outcome::kRejected;
      return exercise(detail::safetensors::read_safetensors(input_of(as_bytes(f), options)), Format::kSafetensors,
                      options);
    }
    // read_bytes and anything else: detection + every reader.
    const Checkpoint c = read_bytes(data, "fuzz", options);
    return exercise(c, family(c.format), options);
  } catch (const Error&) {
    return Outcome::kRejected;
  }
}

// The libFuzzer entry for one of the targets above: a round-trip mismatch is a crash.
inline int fuzz_one(std::string_view target, const std::uint8_t* data, std::size_t size) {
  if (run_reader_target(target, as_bytes(data, size)) == Outcome::kRoundTripMismatch) __builtin_trap();
  return 0;
}

}  // namespace tensorseal::fuzz
