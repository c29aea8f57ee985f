// numpy .npz reader and writer. Grammar (docs/formats/npy.md):
//
//   npz    = zip archive (src/zip/reader.h rules) of members "<key>.npy"
//   member = a whole .npy image, STORED (np.savez) or DEFLATED (np.savez_compressed)
//
// Reading: the value tree is a dict key -> tensor in archive (central directory)
// order, ".npy" stripped. Stored members are zero-copy windows of the file; deflated
// members are inflated into owned storages. CRC32s are checked when
// ReadOptions::verify_checksums is set.
// Writing: members in sorted key order (bytewise), STORED, with the zip profile of
// CPython's zipfile as np.savez drives it (zip::Profile::kNumpy), so the bytes equal
// np.savez(f, **dict(sorted(items))) on a POSIX system with CPython >= 3.11.4-era
// zipfile (see docs/formats/npy.md for the exact conditions). WriteOptions::compress:
// every member DEFLATED by zip::deflate (tensorseal's own, pinned encoder), the rest of
// the archive as np.savez_compressed's zipfile writes it.
#include <algorithm>

#include "numpy/format.h"
#include "numpy/constants.h"
#include "numpy/npy.h"
#include "tensorseal/error.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "zip/constants.h"
#include "zip/deflate.h"
#include "zip/describe.h"
#include "zip/reader.h"
#include "zip/sniff.h"
#include "zip/writer.h"

namespace tensorseal::detail::numpy {
using detail::core::fact;

namespace {

Error in_member(const Error& e, const std::string& member, const std::string& file, std::uint64_t offset) {
  return Error(Rule{e.rule(), e.kind()}, "member '" + member + "': " + e.detail(), file, offset);
}

// Where an object array member's pickle starts, or nullopt for any other member (its
// header errors are reported by numpy::parse below).
std::optional<std::uint64_t> object_member(const std::shared_ptr<const Storage>& image, const std::string& member,
                                           const std::string& file, std::uint64_t offset) {
  try {
    return numpy::object_array_data(image->bytes());
  } catch (const Error&) {
    (void)member, (void)file, (void)offset;
    return std::nullopt;
  }
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
  Checkpoint c;
  c.format = Format::kNpz;
  c.root = Value::dict();
  Dict& d = c.root.as_dict();
  d.items.reserve(archive.entries.size());
  for (const auto& e : archive.entries) {
    if (!e.name.ends_with(numpy::kMemberSuffix) || e.name.size() == numpy::kMemberSuffix.size())
      throw Error(rules::kMemberName, "member '" + e.name + "' is not a '<key>.npy' array", in.name, e.local_offset);
    const std::string key = e.name.substr(0, e.name.size() - numpy::kMemberSuffix.size());
    std::shared_ptr<const Storage> image;
    std::vector<std::byte> scratch;
    const auto data = zip::entry_bytes(file, e, scratch, in.name, limits);
    if (in.options->verify_checksums) zip::verify_crc(e, data, in.name);
    const bool stored = e.method == zip::kMethodStored;
    if (!stored) c.compressed = true;
    if (stored) image = in.window(e.data_offset, e.size);
    else image = Storage::owned(std::move(scratch));
    if (std::optional<std::uint64_t> at; (at = object_member(image, e.name, in.name, e.data_offset))) {
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
      p = numpy::parse(image, limits);
    } catch (const Error& err) {
      if (stored)
        throw in_member(err, e.name, in.name, err.offset() == kNoOffset ? kNoOffset : e.data_offset + err.offset());
      // Offsets inside inflated data do not map to file bytes: point at the member.
      throw in_member(
          Error(Rule{err.rule(), err.kind()},
                err.detail() +
                    (err.offset() == kNoOffset ? "" : " (inflated byte " + std::to_string(err.offset()) + ")")),
          e.name, in.name, e.data_offset);
    }
    // Keys are unique: the zip reader refuses duplicate member names.
    d.set(Value::str(key), Value(std::shared_ptr<const Tensor>(p.tensor)));
    c.facts.push_back(fact(topics::kVersion, e.name, std::to_string(p.major) + "." + std::to_string(p.minor)));
    c.facts.push_back(
        fact(topics::kHeaderPadding, e.name,
             std::to_string(p.trailing_spaces) + " spaces, data at byte " + std::to_string(p.data_offset)));
    if (p.fortran_order) c.facts.push_back(fact(topics::kFortranOrder, e.name, "True"));
    if (p.big_endian) c.facts.push_back(fact(topics::kByteOrder, e.name, "big"));
  }
  for (Fact& f : zip::describe(archive, "")) c.facts.push_back(std::move(f));
  return c;
}

void write_npz(const Value& root, const WriteOptions& options, io::Sink& sink, MemberImage objects) {
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
    if (object) items.push_back({k.as_str(), nullptr, objects(v)});
    else items.push_back({k.as_str(), v.as_tensor().get(), {}});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.key < b.key; });
  zip::Writer w(sink, zip::Profile::kNumpy);
  for (const Item& it : items) {
    if (it.tensor == nullptr) {  // an object array: its image is ready
      const auto image = util::as_bytes(it.image);
      const std::string name = std::string(it.key) + std::string(numpy::kMemberSuffix);
      if (options.compress) {
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
    if (options.compress) {
      // The whole member image in memory: the local header needs the compressed size.
      std::vector<std::byte> image(reinterpret_cast<const std::byte*>(head.data()),
                                   reinterpret_cast<const std::byte*>(head.data()) + head.size());
      image.reserve(head.size() + it.tensor->nbytes());
      it.tensor->for_each_run(
          [&](std::span<const std::byte> run) { image.insert(image.end(), run.begin(), run.end()); });
      const std::vector<std::byte> stream = zip::deflate(image);
      w.record_deflated(std::string(it.key) + std::string(numpy::kMemberSuffix), image.size(),
                        util::crc32(0, image), stream);
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
