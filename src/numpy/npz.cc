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
// zipfile (see docs/formats/npy.md for the exact conditions).
#include <algorithm>
#include <set>

#include "numpy/format.h"
#include "numpy/constants.h"
#include "numpy/npy.h"
#include "tensorseal/error.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "zip/constants.h"
#include "zip/reader.h"
#include "zip/sniff.h"
#include "zip/writer.h"

namespace tensorseal::detail {
namespace nr = tensorseal::numpy::rules;
namespace np = tensorseal::numpy;

namespace {

std::string system_name(unsigned s) {
  switch (s) {
    case 0: return "0 (msdos)";
    case 3: return "3 (unix)";
    case 10: return "10 (ntfs)";
    case 19: return "19 (osx)";
    default: return std::to_string(s);
  }
}

std::string dos_datetime(std::uint16_t date, std::uint16_t time) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04u-%02u-%02u %02u:%02u:%02u", 1980u + (date >> 9), (date >> 5) & 15u, date & 31u,
                time >> 11, (time >> 5) & 63u, (time & 31u) * 2);
  return buf;
}

Error in_member(const Error& e, const std::string& member, const std::string& file, std::uint64_t offset) {
  return Error(Rule{e.rule(), e.kind()}, "member '" + member + "': " + e.detail(), file, offset);
}

}  // namespace

bool detect_npz(std::span<const std::byte> head) noexcept {
  if (zip::starts_with_end_record(head)) return true;
  const auto first = zip::first_local_name(head);
  return first && first->ends_with(".npy");
}

Checkpoint read_npz(const Input& in) {
  const auto& limits = in.options->limits;
  const auto file = in.bytes();
  const zip::Archive archive = zip::read(file, in.name, limits);
  Checkpoint c;
  c.format = Format::kNpz;
  c.root = Value::dict();
  Dict& d = c.root.as_dict();
  d.items.reserve(archive.entries.size());
  std::set<std::string> systems, stamps, methods;
  std::string order;
  for (const auto& e : archive.entries) {
    if (!e.name.ends_with(np::kMemberSuffix) || e.name.size() == np::kMemberSuffix.size())
      throw Error(nr::kMemberName, "member '" + e.name + "' is not a '<key>.npy' array", in.name, e.local_offset);
    const std::string key = e.name.substr(0, e.name.size() - np::kMemberSuffix.size());
    std::shared_ptr<const Storage> image;
    std::vector<std::byte> scratch;
    const auto data = zip::entry_bytes(file, e, scratch, in.name, limits);
    if (in.options->verify_checksums) zip::verify_crc(e, data, in.name);
    const bool stored = e.method == tensorseal::zip::kMethodStored;
    if (stored) image = in.window(e.data_offset, e.size);
    else image = Storage::owned(std::move(scratch));
    npy::Parsed p;
    try {
      p = npy::parse(image, limits);
    } catch (const Error& err) {
      if (stored) throw in_member(err, e.name, in.name, err.offset() == kNoOffset ? kNoOffset : e.data_offset + err.offset());
      // Offsets inside inflated data do not map to file bytes: point at the member.
      throw in_member(Error(Rule{err.rule(), err.kind()},
                            err.detail() + (err.offset() == kNoOffset ? "" : " (inflated byte " + std::to_string(err.offset()) + ")")),
                      e.name, in.name, e.data_offset);
    }
    // Keys are unique: the zip reader refuses duplicate member names.
    d.set(Value::str(key), Value(std::shared_ptr<const Tensor>(p.tensor)));
    c.facts.push_back({"npy.version", e.name, std::to_string(p.major) + "." + std::to_string(p.minor)});
    c.facts.push_back({"npy.header_padding", e.name,
                       std::to_string(p.trailing_spaces) + " spaces, data at byte " + std::to_string(p.data_offset)});
    if (p.fortran_order) c.facts.push_back({"npy.fortran_order", e.name, "True"});
    if (p.big_endian) c.facts.push_back({"npy.byte_order", e.name, "big"});
    systems.insert(system_name(e.version_made_by >> 8));
    stamps.insert(dos_datetime(e.dos_date, e.dos_time));
    methods.insert(stored ? "stored" : "deflated");
    order += (order.empty() ? "" : ",") + key;
  }
  auto joined = [](const std::set<std::string>& s) {
    std::string out;
    for (const auto& v : s) out += (out.empty() ? "" : ", ") + v;
    return out.empty() ? std::string("none") : out;
  };
  c.facts.push_back({"zip.create_system", "central directory", joined(systems)});
  c.facts.push_back({"zip.timestamps", "central directory", joined(stamps)});
  c.facts.push_back({"zip.compression", "central directory", joined(methods)});
  c.facts.push_back({"zip.member_order", "central directory", order});
  c.facts.push_back({"zip.zip64_end_records", "end of file", archive.zip64 ? "yes" : "no"});
  if (archive.prefix_size != 0 || archive.unaccounted_bytes != 0)
    c.facts.push_back({"zip.unaccounted_bytes", "byte 0",
                       std::to_string(archive.unaccounted_bytes) + " (prefix " + std::to_string(archive.prefix_size) + ")"});
  return c;
}

void write_npz(const Value& root, const WriteOptions&, Sink& sink) {
  if (!root.is(Value::Kind::kDict))
    throw Error(nr::kNotFlat, "a .npz file holds a dict of named tensors; got " + std::string(kind_name(root.kind())));
  struct Item {
    std::string_view key;
    const Tensor* tensor;
  };
  std::vector<Item> items;
  for (const auto& [k, v] : root.as_dict().items) {
    if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor))
      throw Error(nr::kNotFlat, "a .npz file holds str -> tensor entries; got " + repr(k, 60) + " -> " + std::string(kind_name(v.kind())));
    if (k.as_str().empty() || k.as_str().find('\0') != std::string_view::npos)
      throw Error(nr::kNotFlat, "key " + repr(k, 60) + " cannot name a zip member");
    items.push_back({k.as_str(), v.as_tensor().get()});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.key < b.key; });
  zip::Writer w(sink, zip::Profile::kNumpy);
  for (const Item& it : items) {
    const std::string head = npy::header_for(*it.tensor);
    // The local header carries the CRC: one pass to compute it, one to write.
    std::uint32_t crc = util::crc32(0, util::as_bytes(head));
    it.tensor->for_each_run([&](std::span<const std::byte> run) { crc = util::crc32(crc, run); });
    w.begin_record(std::string(it.key) + std::string(np::kMemberSuffix), head.size() + it.tensor->nbytes(), crc);
    w.write(util::as_bytes(head));
    it.tensor->for_each_run([&](std::span<const std::byte> run) { w.write(run); });
    w.end_record();
  }
  w.finish();
}

}  // namespace tensorseal::detail
