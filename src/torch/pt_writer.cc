// Canonical .pt writer (spec: docs/formats/canonical-pt.md). The torch 2.x zip layout
// with every source of variation removed:
//
//   archive/data.pkl                 canonical pickle (protocol 2), keys "0","1",... by first use
//   archive/.format_version          "1"
//   archive/.storage_alignment       "64"
//   archive/byteorder                "little"
//   archive/data/<key>               planned storage bytes (only what tensors reach)
//   archive/version                  "3\n"
//   archive/.data/serialization_id   40 digits from SHA-256 over the sorted (name, size, crc32)
//
// Fixed prefix "archive" (what torch uses for buffers; never the file name), zip
// profile from zip::Writer (64-byte alignment, zero timestamps, data descriptors,
// zip64 end records). Storage bytes stream from the inputs (often a memory map).
#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <tuple>

#include "pickle/writer.h"
#include "tensorseal/error.h"
#include "torch/emit.h"
#include "torch/format.h"
#include "torch/plan.h"
#include "util/endian.h"
#include "zip/reader.h"
#include "zip/writer.h"

namespace tensorseal::detail::torch {

namespace {

constexpr std::string_view kPrefix = "archive/";
constexpr std::string_view kStorageDir = "data/";  // storage k: kPrefix + kStorageDir + k in decimal

// `key` in decimal, as std::to_string writes it, in `out`.
std::string_view key_digits(std::size_t key, char (&out)[24]) {
  const auto end = std::to_chars(out, out + sizeof out, key).ptr;
  return {out, static_cast<std::size_t>(end - out)};
}

// Calls f(k) for k = 0 .. n-1 in the order of their decimal names (std::to_string):
// "0", "1", "10", "100", ..., "11", ...: a walk of the digit trie, each name before the
// names it prefixes. Storage records are named storage_name(k), one prefix then the
// decimal key, so this is their order by name, without comparing names.
template <typename F>
void in_name_order(std::size_t n, F&& f) {
  if (n == 0) return;
  f(std::size_t{0});  // "0" prefixes no other key (no leading zeros)
  auto visit = [&](auto& self, std::size_t k) -> void {
    f(k);
    if (k > (n - 1) / 10) return;  // k * 10 >= n: no longer key starts with k's digits
    for (std::size_t c = k * 10; c < n && c < k * 10 + 10; ++c) self(self, c);
  };
  for (std::size_t d = 1; d < 10 && d < n; ++d) visit(visit, d);
}

// 40 decimal digits of the first 16 bytes of SHA-256 over z's records so far, sorted by
// (name, size, crc32). Records [first, first + storages) are the storages, named
// storage_name(k) (Archive::add_storage checks): they come in name order from
// in_name_order, O(n) without comparing names, and are merged with the few others,
// sorted.
std::string serialization_id(const zip::Writer& z, std::size_t first, std::size_t storages) {
  const auto less = [](const zip::Writer::Ended& a, const zip::Writer::Ended& b) {
    return std::tie(a.name, a.size, a.crc) < std::tie(b.name, b.size, b.crc);
  };
  std::vector<zip::Writer::Ended> others;
  for (std::size_t i = 0; i < z.records(); ++i)
    if (i < first || i >= first + storages) others.push_back(z.ended(i));
  std::sort(others.begin(), others.end(), less);
  std::string buf;
  buf.reserve((others.size() + storages) * 40);
  const auto append = [&](const zip::Writer::Ended& e) {
    buf += e.name;
    buf += '\0';
    util::append_le<std::uint64_t>(buf, e.size);
    util::append_le<std::uint32_t>(buf, e.crc);
  };
  auto next = others.begin();
  in_name_order(storages, [&](std::size_t k) {
    const zip::Writer::Ended e = z.ended(first + k);
    for (; next != others.end() && less(*next, e); ++next) append(*next);
    append(e);
  });
  for (; next != others.end(); ++next) append(*next);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(buf.data(), buf.size(), md, &len, EVP_sha256(), nullptr);
  unsigned __int128 x = 0;
  for (int i = 0; i < 16; ++i) x = (x << 8) | md[i];
  std::string digits(40, '0');
  for (int i = 39; i >= 0 && x != 0; --i) {
    digits[i] = static_cast<char>('0' + static_cast<int>(x % 10));
    x /= 10;
  }
  return digits;
}

}  // namespace

Archive::Archive(zip::Writer& z, std::string_view pkl) : z_(z) {
  small("data.pkl", pkl);
  small(".format_version", "1");
  small(".storage_alignment", "64");
  small("byteorder", "little");
  first_storage_ = z_.records();
}

void Archive::small(std::string_view name, std::string_view data) {
  z_.record(std::string(kPrefix) + std::string(name), data);
}

std::string Archive::storage_name(std::size_t key) {
  char digits[24];
  const std::string_view k = key_digits(key, digits);
  std::string full;
  full.reserve(kPrefix.size() + kStorageDir.size() + k.size());
  full += kPrefix;
  full += kStorageDir;
  full += k;
  return full;
}

void Archive::add_storage() {
  char digits[24];
  const std::string_view k = key_digits(storages_, digits);
  // The last record's name is storage_name(storages_), compared without making it.
  const std::string_view name = z_.records() == first_storage_ + storages_ + 1 ? z_.ended(z_.records() - 1).name : "";
  if (name.size() != kPrefix.size() + kStorageDir.size() + k.size() || !name.starts_with(kPrefix) ||
      !name.substr(kPrefix.size()).starts_with(kStorageDir) || !name.ends_with(k))
    throw Error(tensorseal::rules::kInternal,
                "canonical .pt writer: storage record '" + storage_name(storages_) + "' is not the next record");
  ++storages_;
}

void Archive::set_crc(std::size_t key, std::uint32_t crc) {
  if (key >= storages_)
    throw Error(tensorseal::rules::kInternal, "canonical .pt writer: no storage " + std::to_string(key));
  z_.set_crc(first_storage_ + key, crc);
}

void Archive::finish() {
  small("version", "3\n");
  const std::string id = serialization_id(z_, first_storage_, storages_);
  z_.record(std::string(kPrefix) + ".data/serialization_id", id);
  z_.finish();
}

void write_torch_zip(const Value& root, const WriteOptions&, io::Sink& sink) {
  torch::StoragePlan plan(root);
  pickle::Writer pw(torch::make_hooks(plan, false));
  const std::string pkl = pw.finish(root);

  zip::Writer z(sink, zip::Profile::kTorch, 64);
  Archive archive(z, pkl);
  for (const torch::PlannedStorage* s : plan.used()) {
    const std::string full = Archive::storage_name(archive.storages());
    // A record that is exactly a storage a reader verified (a whole torch zip record,
    // or its prefix) reuses the CRC32 computed while verifying: canon .pt -> .pt then
    // checksums the data once, not twice. Anything else (windows, gathers, owned or
    // borrowed memory) is checksummed as it is written.
    // (Only a storage with a verified CRC can be a source: most are not, and are not
    // measured against the record.)
    const Storage* candidate = s->whole ? s->whole.get() : s->dense_source ? s->dense_source->storage.get() : nullptr;
    const Storage* source = candidate != nullptr && candidate->verified_crc32() ? s->exact_source() : nullptr;
    const std::optional<std::uint32_t> known =
        source != nullptr && s->nbytes > 0 ? source->verified_crc32() : std::nullopt;
    if (known)
      z.begin_record_known_crc(full, s->nbytes, *known);
    else
      z.begin_record(full, s->nbytes);
    std::size_t runs = 0;
    s->for_each_run([&](std::span<const std::byte> run) {
      // The reused CRC covers source->bytes(); the data must be exactly that one run.
      if (known && (++runs > 1 || run.data() != source->bytes().data() || run.size() != source->size()))
        throw Error(tensorseal::rules::kInternal,
                    "canonical .pt writer: record '" + full + "' is not the verified storage's bytes");
      // Storage bytes (the tree holds them until we return) go without a copy; a
      // gathered span lives in the plan, which also outlives the flush below.
      z.write_borrowed(run);
    });
    z.end_record();
    archive.add_storage();
  }
  archive.finish();
  sink.flush();
}

}  // namespace tensorseal::detail::torch
