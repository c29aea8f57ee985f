// torch zip checkpoints (torch.save default since 1.6). Grammar (docs/formats/torch-zip.md):
//
//   archive = zip of records under one folder "<prefix>/":
//     data.pkl                  pickle protocol 2; storages are BINPERSID of
//                               ('storage', <storage class>, <key>, <location>, <numel>)
//     data/<key>                raw storage bytes, one record per storage
//     version | .data/version   "1".."10" (+ newline)
//     byteorder                 "little" | "big" (absent: little)          [2.1+]
//     .format_version, .storage_alignment, .data/serialization_id, ...    [2.x]
//   TorchScript archives (constants.pkl, code/) and torch.export archives (archive_format)
//   are programs and are refused.
//
// Checks beyond torch's own loader: every entry under the prefix, CRC32 of every record
// read (torch never checks; storage records on every core, see below), storage numel *
// itemsize within its record (the CVE-2026-24747 shape), every view inside its storage
// (Tensor::validate).
#include <fmt/format.h>

#include <map>

#include "core/storage_access.h"
#include "torch/constants.h"
#include "torch/format.h"
#include "torch/rebuild.h"
#include "util/endian.h"
#include "util/parallel.h"
#include "zip/constants.h"
#include "zip/describe.h"
#include "zip/reader.h"

namespace tensorseal::detail::torch {
using core::fact;

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

// Storage slack: bytes of a storage no tensor reaches (a view saved with its whole
// storage, e.g. a slice of a big tensor). Reported per storage key for `explain`.
// Records torch.save writes and torch.load reads (names relative to the archive folder).
bool is_torch_record(std::string_view name) {
  for (auto r : {torch::kDataPkl, torch::kVersionRecord, torch::kDataVersionRecord, torch::kByteOrderRecord,
                 torch::kFormatVersionRecord, torch::kStorageAlignmentRecord, torch::kSerializationIdRecord})
    if (name == r) return true;
  return name.starts_with(torch::kDataDir) && name.size() > torch::kDataDir.size() &&
         name.find('/', torch::kDataDir.size()) == std::string_view::npos;
}

void add_slack_facts(const Value& root, const std::map<const Storage*, std::string>& keys, Checkpoint& c) {
  std::map<const Storage*, std::pair<std::uint64_t, std::uint64_t>> used;
  for (const auto& ref : collect_tensors(root)) {
    const Tensor& t = *ref.tensor;
    auto [b, e] = t.storage_extent();
    if (b == e) continue;
    const Storage* s = t.lazy ? t.lazy->raw.get() : t.storage.get();  // a conj/neg view reads its raw storage
    auto it = used.find(s);
    if (it == used.end())
      used.emplace(s, std::pair(b, e));
    else
      it->second = {std::min(it->second.first, b), std::max(it->second.second, e)};
  }
  for (const auto& [s, key] : keys) {
    auto it = used.find(s);
    const std::uint64_t reach = it == used.end() ? 0 : it->second.second - it->second.first;
    if (reach < s->size())
      c.facts.push_back(fact(topics::kStorageSlack, "storage " + key,
                             fmt::format("{} of {} bytes unused by any tensor", s->size() - reach, s->size())));
  }
}

}  // namespace

Checkpoint read_torch_zip(const io::Input& in) {
  const Limits& limits = in.options->limits;
  const auto file = in.bytes();
  zip::Archive ar = zip::read(file, in.name, limits);
  if (ar.entries.empty()) throw Error(rules::kNoDataPkl, "empty zip archive", in.name, 0);
  // torch.save under torch.serialization.skip_data() writes each storage record's size
  // but not its bytes (write_record_metadata), with 0 for its CRC-32, so that the bytes
  // can be filled in place later; torch.load never checks them. A storage record
  // (<prefix>/data/<key>) with bytes and a CRC of 0 is such a record: not recorded.
  std::string skipped;
  for (auto& e : ar.entries) {
    const auto at = e.name.find('/');
    if (e.crc_recorded && e.crc32 == 0 && e.size > 0 && at != std::string::npos &&
        std::string_view(e.name).substr(at + 1).starts_with(torch::kDataDir)) {
      e.crc_recorded = false;
      skipped += (skipped.empty() ? "" : ",") + e.name.substr(at + 1);
    }
  }
  zip::refuse_case_collision(ar, in.name);

  // The prefix is the folder of the first entry; every entry must live under it.
  const std::string& first = ar.entries.front().name;
  const auto slash = first.find('/');
  if (slash == std::string::npos)
    throw Error(rules::kMixedPrefix, fmt::format("first entry '{}' is not inside a folder", first), in.name,
                ar.entries.front().local_offset);
  const std::string prefix = first.substr(0, slash + 1);
  std::map<std::string, const zip::Entry*> records;
  for (const auto& e : ar.entries) {
    if (!e.name.starts_with(prefix))
      throw Error(rules::kMixedPrefix, fmt::format("entry '{}' is outside the archive folder '{}'", e.name, prefix),
                  in.name, e.local_offset);
    records.emplace(e.name.substr(prefix.size()), &e);
  }
  if (const auto it = records.find(std::string(torch::kExportMarker)); it != records.end())
    throw Error(rules::kExportProgram,
                "torch.export archive (.pt2, has 'archive_format'): a program, not a checkpoint; refusing", in.name,
                it->second->local_offset);
  for (const auto& [name, e] : records)
    for (auto marker : torch::kTorchScriptMarkers)
      if (name == marker || (marker.ends_with('/') && name.starts_with(marker)))
        throw Error(rules::kTorchScript,
                    fmt::format("TorchScript archive (has '{}'): a program, not a checkpoint; refusing", name), in.name,
                    e->local_offset);

  std::vector<std::byte> scratch;
  auto record_bytes = [&](const zip::Entry& e) {
    auto b = zip::entry_bytes(file, e, scratch, in.name, limits);
    if (in.options->verify_checksums) zip::verify_crc(e, b, in.name);
    return b;
  };
  auto small_record = [&](std::string_view name) -> std::optional<std::string> {
    auto it = records.find(std::string(name));
    if (it == records.end()) return std::nullopt;
    if (it->second->size > 4096)
      throw Error(rules::kBadVersion,
                  fmt::format("record '{}' is {} bytes; expected a short text", name, it->second->size), in.name,
                  it->second->data_offset);
    return std::string(util::as_chars(record_bytes(*it->second)));
  };

  Checkpoint c;
  c.format = Format::kTorchZip;
  if (!ar.crcs_recorded)
    c.facts.push_back(fact(topics::kCrcNotRecorded, "crc32", "not recorded"));
  else if (!skipped.empty())
    c.facts.push_back(fact(topics::kCrcSkipped, "crc32", skipped));
  {
    std::string unexpected;
    for (const auto& [name, e] : records)
      if (!is_torch_record(name)) unexpected += (unexpected.empty() ? "" : ",") + name;
    if (!unexpected.empty()) c.facts.push_back(fact(topics::kUnexpectedRecords, "records", unexpected));
  }

  auto version = small_record(torch::kVersionRecord);
  if (!version) version = small_record(torch::kDataVersionRecord);
  if (!version) throw Error(rules::kBadVersion, "no 'version' or '.data/version' record", in.name, 0);
  {
    const std::string v = trim(*version);
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < torch::kMinFileVersion || n > torch::kMaxFileVersion)
      throw Error(rules::kBadVersion, fmt::format("file version '{}' is not in 1..10", v), in.name,
                  records.count("version") ? records["version"]->data_offset : 0);
    c.facts.push_back(fact(topics::kFileVersion, "version", v));
  }
  bool big_endian = false;
  if (auto bo = small_record(torch::kByteOrderRecord)) {
    const std::string v = trim(*bo);
    if (v != "little" && v != "big")
      throw Error(rules::kBadByteOrder, "byteorder record says '" + v + "'", in.name,
                  records["byteorder"]->data_offset);
    big_endian = v == "big";
    c.facts.push_back(fact(topics::kByteorder, "byteorder", v));
  } else {
    c.facts.push_back(fact(topics::kByteorder, "byteorder", "(no record)"));
  }
  for (auto name : {torch::kFormatVersionRecord, torch::kStorageAlignmentRecord, torch::kSerializationIdRecord}) {
    auto v = small_record(name);
    c.facts.push_back(fact(name == torch::kSerializationIdRecord ? topics::kSerializationId : topics::kRecord,
                           std::string(name), v ? trim(*v) : "(no record)"));
  }

  auto pkl = records.find(std::string(torch::kDataPkl));
  if (pkl == records.end()) throw Error(rules::kNoDataPkl, fmt::format("no '{}data.pkl' record", prefix), in.name, 0);
  const zip::Entry& pkl_entry = *pkl->second;
  // torch writes data.pkl stored; a deflated one inflates against the pickle budget
  // (refused by its declared size before anything is inflated).
  if (pkl_entry.method != zip::kMethodStored && pkl_entry.size > limits.max_pickle_inflate)
    throw Error(zip::rules::kEntryTooLarge,
                fmt::format("entry '{}' inflates to {} bytes, over max_pickle_inflate ({})", pkl_entry.name,
                            pkl_entry.size, limits.max_pickle_inflate),
                in.name, pkl_entry.data_offset);
  std::vector<std::byte> pkl_scratch;
  auto pkl_bytes = zip::entry_bytes(file, pkl_entry, pkl_scratch, in.name, limits);
  if (in.options->verify_checksums) zip::verify_crc(pkl_entry, pkl_bytes, in.name);

  // Storages: one per (key, dtype), created on first use, windows of their records.
  std::map<std::pair<std::string, DType>, std::shared_ptr<const Storage>> storages;
  std::map<const Storage*, std::string> storage_keys;
  // Storage records to verify, and for each the storages made from it (one per dtype
  // the file views it as); `need` is the first one's size.
  struct RecordUse {
    const zip::Entry* entry;
    std::uint64_t need;
    std::vector<Storage*> storages;
  };
  std::vector<RecordUse> to_verify;
  std::map<const zip::Entry*, std::size_t> record_index;
  std::vector<std::string> key_order;
  auto persistent_load = [&](const Value& pid, std::uint64_t offset) -> Value {
    torch::StorageRef ref = torch::parse_storage_pid(pid, false, in.name, offset);
    auto key = std::pair(ref.key, ref.dtype);
    if (auto it = storages.find(key); it != storages.end()) return Value(it->second);
    auto rec = records.find(std::string(torch::kDataDir) + ref.key);
    if (rec == records.end())
      throw Error(rules::kMissingStorage,
                  fmt::format("storage '{}' has no record '{}data/{}'", ref.key, prefix, ref.key), in.name, offset);
    const zip::Entry& e = *rec->second;
    if (e.method != 0)
      throw Error(rules::kMissingStorage,
                  fmt::format("storage record '{}' is compressed; torch stores them uncompressed", e.name), in.name,
                  e.local_offset);
    const std::uint64_t need = ref.nbytes();
    if (need > e.size)
      throw Error(rules::kStorageTooSmall,
                  fmt::format("storage '{}' ({} x {}) needs {} bytes but its record has {}", ref.key, ref.numel,
                              ref.type_name, need, e.size),
                  in.name, e.data_offset);
    std::shared_ptr<Storage> s = in.window(e.data_offset, need);
    s->dtype = ref.dtype;
    auto [use, fresh] = record_index.emplace(&e, to_verify.size());
    if (fresh) to_verify.push_back({&e, need, {}});
    if (big_endian) {
      if (!ref.typed)
        throw Error(rules::kBadByteOrder, "big-endian untyped storages are not supported", in.name, e.data_offset);
      s = torch::swapped_copy(*s, ref.dtype);
      s->dtype = ref.dtype;
    }
    // Same key, other dtype: the same window. Byte-swapped copies are not windows of
    // the record, but may still carry its pending checksum.
    to_verify[use->second].storages.push_back(s.get());
    if (e.size > need)
      c.facts.push_back(fact(topics::kStorageSlack, "record data/" + ref.key,
                             fmt::format("{} bytes past the storage's end", e.size - need)));
    storages.emplace(key, s);
    storage_keys.emplace(s.get(), ref.key);
    key_order.push_back(ref.key);
    c.facts.push_back(fact(topics::kStorageKey, fmt::format("storage #{}", key_order.size() - 1), ref.key));
    return Value(std::shared_ptr<const Storage>(s));
  };
  c.root = torch::unpickle(in, pkl_bytes, pkl_entry.data_offset, std::string(torch::kDataPkl), persistent_load, c);

  // Storage records: the bulk of the file. Verified here on every core, in 8 MiB
  // pieces combined per record (zip::verify_crcs), and each storage that is a plain
  // window of its record keeps the CRC32 of its bytes, computed in the same pass, so
  // that the canonical .pt writer need not compute it again. With in.checks_later the
  // checksums are left to the consumer instead (io::LaterChecks): carried by each
  // storage, or listed.
  if (in.options->verify_checksums) {
    if (in.checks_later) {
      for (const RecordUse& u : to_verify) {
        auto pending = std::make_shared<Storage::PendingChecksum>();
        pending->covered = file.subspan(u.entry->data_offset, u.entry->size);
        pending->check = [entry = *u.entry, name = in.name, keep = in.whole](std::uint32_t crc) {
          zip::check_crc(entry, crc, name);  // `keep` holds the covered bytes
        };
        if (in.checks_later->where == io::LaterChecks::Where::kOnStorages) {
          for (Storage* s : u.storages) core::StorageAccess::set_pending_checksum(*s, pending);
        } else {
          in.checks_later->add(std::move(pending));
        }
      }
    } else {
      std::vector<zip::CrcCheck> checks;
      checks.reserve(to_verify.size());
      for (const RecordUse& u : to_verify)
        checks.push_back({*u.entry, file.subspan(u.entry->data_offset, u.entry->size), u.need});
      const std::vector<std::uint32_t> prefix_crcs = zip::verify_crcs(checks, in.name);
      for (std::size_t i = 0; i < to_verify.size(); ++i)
        for (Storage* s : to_verify[i].storages)
          if (!big_endian && s->size() == to_verify[i].need)  // else a window
            core::StorageAccess::set_verified_crc32(*s, prefix_crcs[i]);
    }
  }

  // Container facts for `explain`.
  for (Fact& f : zip::describe(ar, prefix)) c.facts.push_back(std::move(f));
  add_slack_facts(c.root, storage_keys, c);
  return c;
}

}  // namespace tensorseal::detail::torch
