// numpy .npz reader and writer. Grammar (docs/formats/npy.md):
//
//   npz    = zip archive (src/zip/reader.h rules) of members "<key>.npy"
//   member = a whole .npy image, STORED (np.savez) or DEFLATED (np.savez_compressed)
//
// Reading: the value tree is a dict key -> tensor in archive (central directory)
// order, ".npy" stripped. Stored members are zero-copy windows of the file, their
// CRC-32s checked as they are read. Deflated members are refused first when they would
// inflate past the limits (zip::check_inflate, on the declared sizes); each is then read
// as far as its .npy header, and its data is a streamed storage: every consumer inflates
// it window by window (its CRC-32 and sizes checked at the end of each pass), and one
// that needs one buffer (a strided view, Python's arrays) inflates it whole under
// max_alloc. Object arrays are inflated whole (under max_pickle_inflate). CRC-32s are
// checked when ReadOptions::verify_checksums is set.
// Writing: members in sorted key order (bytewise), STORED, with the zip profile of
// CPython's zipfile as np.savez drives it (zip::Profile::kNumpy), so the bytes equal
// np.savez(f, **dict(sorted(items))) on a POSIX system with CPython >= 3.11.4-era
// zipfile (see docs/formats/npy.md for the exact conditions). WriteOptions::compress:
// every member DEFLATED by zip::deflate (tensorseal's own, pinned encoder), the rest of
// the archive as np.savez_compressed's zipfile writes it.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "numpy/constants.h"
#include "numpy/format.h"
#include "numpy/npy.h"
#include "tensorseal/error.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "zip/constants.h"
#include "zip/deflate.h"
#include "zip/describe.h"
#include "zip/inflate.h"
#include "zip/reader.h"
#include "zip/sniff.h"
#include "zip/writer.h"

namespace tensorseal::detail::numpy {
using detail::core::fact;

namespace {

Error in_member(const Error& e, const std::string& member, const std::string& file, std::uint64_t offset) {
  return Error(Rule{e.rule(), e.kind()}, "member '" + member + "': " + e.detail(), file, offset);
}

// Where an object array member's pickle starts, given the member's first bytes (at
// least its header), or nullopt for any other member (its header errors are reported
// by numpy::parse below).
std::optional<std::uint64_t> object_member(std::span<const std::byte> head) {
  try {
    return numpy::object_array_data(head);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The first bytes of deflated member `e`: at least its whole .npy header (all of it
// when the member is shorter), inflating no more than the header and one small window.
std::vector<std::byte> member_head(std::span<const std::byte> file, const zip::Entry& e, const std::string& name) {
  constexpr std::uint64_t kWindow = 4096;
  std::vector<std::byte> head;
  std::uint64_t want = std::min<std::uint64_t>(e.size, numpy::kPrefixSizeV2);
  bool sized = false;
  zip::inflate_entry(file, e, name, false, false, kWindow, [&](std::uint64_t, std::span<const std::byte> b) {
    head.insert(head.end(), b.begin(), b.end());
    if (!sized && head.size() >= want) {  // the prefix: magic, version, header length
      sized = true;
      const auto major = head.size() > 6 ? static_cast<unsigned>(head[6]) : 0u;
      std::uint64_t hlen = 0, prefix = 0;
      if (major == 1 && head.size() >= numpy::kPrefixSizeV1) {
        prefix = numpy::kPrefixSizeV1;
        hlen = util::load_le<std::uint16_t>(head.data() + 8);
      } else if ((major == 2 || major == 3) && head.size() >= numpy::kPrefixSizeV2) {
        prefix = numpy::kPrefixSizeV2;
        hlen = util::load_le<std::uint32_t>(head.data() + 8);
      }
      // Too long a header is refused from the prefix alone.
      if (prefix != 0 && hlen <= numpy::kMaxHeaderSize) want = std::min(e.size, prefix + hlen);
    }
    return head.size() < want;
  });
  return head;
}

// The data of deflated member `e`, bytes [at, at + nbytes) of its inflated image, as a
// streamed storage (big-endian elements of `swap` bytes swapped as they stream).
std::shared_ptr<Storage> streamed_member(const io::Input& in, const zip::Entry& e, std::uint64_t at,
                                         std::uint64_t nbytes, DType dtype, std::uint32_t swap) {
  const std::shared_ptr<const Storage> whole = in.whole;
  const std::string name = in.name;
  const bool verify = in.options->verify_checksums;
  const Limits limits = in.options->limits;
  // Only a file mapping gives its consumed pages back (an owned buffer must keep them).
  const bool release = whole->is_mapped();
  auto read = [whole, e, name, verify, release, at, swap](std::uint64_t offset, std::uint64_t size,
                                                          const Storage::Sink& sink) {
    const std::uint64_t lo = at + offset, hi = lo + size;                // in the member's image
    auto emit = [&](std::uint64_t from, std::span<const std::byte> b) {  // b's part inside [lo, hi)
      const std::uint64_t a = std::max(from, lo), z = std::min(from + b.size(), hi);
      if (a < z) sink(b.subspan(a - from, z - a));
    };
    if (swap <= 1) {
      zip::inflate_entry(whole->bytes(), e, name, verify, release, zip::kInflateWindow,
                         [&](std::uint64_t from, std::span<const std::byte> b) {
                           emit(from, b);
                           return true;  // to the end: the whole stream is checked
                         });
      return;
    }
    // Swapped in a buffer whose start stays a multiple of `swap` past the data's start.
    std::vector<std::byte> buf;
    buf.reserve(zip::kInflateWindow);
    std::uint64_t buf_at = at;
    auto flush = [&] {
      util::byteswap_inplace(buf, swap);
      emit(buf_at, buf);
      buf_at += buf.size();
      buf.clear();
    };
    zip::inflate_entry(whole->bytes(), e, name, verify, release, zip::kInflateWindow,
                       [&](std::uint64_t from, std::span<const std::byte> b) {
                         if (from + b.size() <= at) return true;  // the header
                         if (from < at) b = b.subspan(at - from);
                         while (!b.empty()) {
                           const std::size_t n = std::min<std::size_t>(b.size(), zip::kInflateWindow - buf.size());
                           buf.insert(buf.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
                           b = b.subspan(n);
                           if (buf.size() == zip::kInflateWindow) flush();
                         }
                         return true;
                       });
    flush();
  };
  auto join = [whole, e, name, verify, limits, at, nbytes, swap]() -> std::shared_ptr<const Storage> {
    std::vector<std::byte> image = zip::inflate_entry_whole(whole->bytes(), e, name, verify, limits);
    util::byteswap_inplace(std::span(image).subspan(at, nbytes), swap);
    return Storage::slice(Storage::owned(std::move(image)), at, nbytes);
  };
  return Storage::streamed(nbytes, std::move(read), std::move(join), dtype);
}

}  // namespace

bool detect_npz(std::span<const std::byte> head) noexcept {
  if (zip::starts_with_end_record(head)) return true;
  const auto first = zip::first_local_name(head);
  return first && first->ends_with(".npy");
}

Checkpoint read_npz(const io::Input& in) {
  const auto& limits = in.options->limits;
  const auto file = in.bytes();
  const zip::Archive archive = zip::read(file, in.name, limits);
  zip::check_inflate(archive, in.name, limits);
  Checkpoint c;
  c.format = Format::kNpz;
  c.root = Value::dict();
  Dict& d = c.root.as_dict();
  d.items.reserve(archive.entries.size());
  for (const auto& e : archive.entries) {
    if (!e.name.ends_with(numpy::kMemberSuffix) || e.name.size() == numpy::kMemberSuffix.size())
      throw Error(rules::kMemberName, "member '" + e.name + "' is not a '<key>.npy' array", in.name, e.local_offset);
    const std::string key = e.name.substr(0, e.name.size() - numpy::kMemberSuffix.size());
    const bool stored = e.method == zip::kMethodStored;
    std::shared_ptr<const Storage> image;  // the whole member: stored, or an object array
    std::vector<std::byte> head;           // a deflated member's first bytes
    std::optional<std::uint64_t> object_at;
    if (stored) {
      std::vector<std::byte> scratch;
      const auto data = zip::entry_bytes(file, e, scratch, in.name, limits);
      if (in.options->verify_checksums) zip::verify_crc(e, data, in.name);
      image = in.window(e.data_offset, e.size);
      object_at = object_member(image->bytes());
    } else {
      if (option_value(c.layout, "compress").empty()) c.layout.emplace_back("compress", "1");
      head = member_head(file, e, in.name);
      if ((object_at = object_member(head))) {  // a pickle: inflated whole, under the pickle budget
        if (e.size > limits.max_pickle_inflate)
          throw Error(zip::rules::kEntryTooLarge,
                      fmt::format("object array member '{}' inflates to {} bytes, over --max-pickle-inflate {}", e.name,
                                  e.size, limits.max_pickle_inflate),
                      in.name, e.data_offset);
        image = Storage::owned(zip::inflate_entry_whole(file, e, in.name, in.options->verify_checksums, limits));
      }
    }
    if (object_at) {
      const auto at = object_at;
      io::Input sub = in;
      sub.whole = image;
      sub.name = in.name + "/" + e.name;
      Checkpoint member = read_object_npy(sub, *at);
      for (auto& g : member.globals) c.globals.push_back(std::move(g));
      d.set(Value::str(key), std::move(member.root));
      continue;
    }
    numpy::Parsed p;
    try {
      p = stored ? numpy::parse(image, limits) : numpy::parse_header(head, e.size, limits);
    } catch (const Error& err) {
      if (stored)
        throw in_member(err, e.name, in.name, err.offset() == kNoOffset ? kNoOffset : e.data_offset + err.offset());
      // Offsets inside inflated data do not map to file bytes: point at the member.
      throw in_member(
          Error(Rule{err.rule(), err.kind()},
                err.detail() + (err.offset() == kNoOffset ? "" : fmt::format(" (inflated byte {})", err.offset()))),
          e.name, in.name, e.data_offset);
    }
    if (!stored) {
      const DType dtype = p.tensor->dtype;
      p.tensor->storage =
          streamed_member(in, e, p.data_offset, p.tensor->nbytes(), dtype, p.big_endian ? swap_unit(dtype) : 0);
      p.tensor->validate();
    }
    // Keys are unique: the zip reader refuses duplicate member names.
    d.set(Value::str(key), Value(std::shared_ptr<const Tensor>(p.tensor)));
    c.facts.push_back(fact(topics::kVersion, e.name, fmt::format("{}.{}", p.major, p.minor)));
    c.facts.push_back(fact(topics::kHeaderPadding, e.name,
                           fmt::format("{} spaces, data at byte {}", p.trailing_spaces, p.data_offset)));
    if (p.fortran_order) c.facts.push_back(fact(topics::kFortranOrder, e.name, "True"));
    if (p.big_endian) c.facts.push_back(fact(topics::kByteOrder, e.name, "big"));
  }
  for (Fact& f : zip::describe(archive, "")) c.facts.push_back(std::move(f));
  return c;
}

std::string parse_compress(std::string_view text) {
  if (text != "0" && text != "1")
    throw Error(tensorseal::rules::kInvalidArgument, "compress is 0 or 1, not '" + std::string(text) + "'");
  return std::string(text);
}

WriteParams write_params(const WriteOptions& options) {
  WriteParams p;
  if (const auto v = option_value(options.format_options, "compress"); !v.empty())
    p.compress = parse_compress(v) == "1";
  return p;
}

void write_npz(const Value& root, const WriteOptions& options, io::Sink& sink, MemberImage objects) {
  const bool compress = write_params(options).compress;
  if (!root.is(Value::Kind::kDict))
    throw Error(rules::kNotFlat,
                "a .npz file holds a dict of named tensors; got " + std::string(kind_name(root.kind())));
  struct Item {
    std::string_view key;
    const Tensor* tensor;  // null for an object array, whose whole image is `image`
    std::string image;
  };
  std::vector<Item> items;
  for (const auto& [k, v] : root.as_dict().items) {
    const bool object = objects != nullptr && v.is(Value::Kind::kObject);
    if (!k.is(Value::Kind::kStr) || (!v.is(Value::Kind::kTensor) && !object))
      throw Error(rules::kNotFlat, "a .npz file holds str -> tensor entries; got " + repr(k, 60) + " -> " +
                                       std::string(kind_name(v.kind())));
    if (k.as_str().empty() || k.as_str().find('\0') != std::string_view::npos)
      throw Error(rules::kNotFlat, "key " + repr(k, 60) + " cannot name a zip member");
    if (object)
      items.push_back({k.as_str(), nullptr, objects(v)});
    else
      items.push_back({k.as_str(), v.as_tensor().get(), {}});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.key < b.key; });
  zip::Writer w(sink, zip::Profile::kNumpy);
  for (const Item& it : items) {
    if (it.tensor == nullptr) {  // an object array: its image is ready
      const auto image = util::as_bytes(it.image);
      const std::string name = std::string(it.key) + std::string(numpy::kMemberSuffix);
      if (compress) {
        const std::vector<std::byte> in(image.begin(), image.end());
        w.record_deflated(name, in.size(), util::crc32(0, image), zip::deflate(in));
      } else {
        w.begin_record(name, image.size(), util::crc32(0, image));
        w.write(image);
        w.end_record();
      }
      continue;
    }
    const std::string head = numpy::header_for(*it.tensor);
    if (compress) {
      // The whole member image in memory: the local header needs the compressed size.
      std::vector<std::byte> image(reinterpret_cast<const std::byte*>(head.data()),
                                   reinterpret_cast<const std::byte*>(head.data()) + head.size());
      image.reserve(head.size() + it.tensor->nbytes());
      it.tensor->for_each_run(
          [&](std::span<const std::byte> run) { image.insert(image.end(), run.begin(), run.end()); });
      const std::vector<std::byte> stream = zip::deflate(image);
      w.record_deflated(std::string(it.key) + std::string(numpy::kMemberSuffix), image.size(), util::crc32(0, image),
                        stream);
      continue;
    }
    // The local header carries the CRC: one pass to compute it, one to write.
    std::uint32_t crc = util::crc32(0, util::as_bytes(head));
    it.tensor->for_each_run([&](std::span<const std::byte> run) { crc = util::crc32(crc, run); });
    w.begin_record(std::string(it.key) + std::string(numpy::kMemberSuffix), head.size() + it.tensor->nbytes(), crc);
    w.write(util::as_bytes(head));
    it.tensor->for_each_run([&](std::span<const std::byte> run) { w.write(run); });
    w.end_record();
  }
  w.finish();
}

}  // namespace tensorseal::detail::numpy
