#include "dcp/manifest.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "dcp/constants.h"
#include "hash/digest.h"
#include "tensorseal/error.h"
#include "util/hex.h"

namespace tensorseal::detail::dcp {
using json = nlohmann::ordered_json;

std::string item_checksum(std::span<const std::byte> bytes) {
  return "xxh3:" + util::to_hex(hash::Digest::oneshot(HashAlgo::kXxh3, bytes));
}

std::string encode_manifest(const std::vector<DcpRecord>& records, const std::string& content_hash) {
  json items = json::array();
  for (const auto& r : records) {
    json row = json::object();
    row["file"] = r.storage.relative_path;
    row["offset"] = r.storage.offset;
    row["length"] = r.storage.length;
    row["fqn"] = r.fqn;
    row["offsets"] = r.offsets ? json(*r.offsets) : json(nullptr);
    row["checksum"] = r.checksum;
    row["digest"] = r.digest;
    items.push_back(std::move(row));
  }
  json j = json::object();
  j["format"] = dcp::kManifestFormat;
  j["version"] = dcp::kManifestVersion;
  if (!content_hash.empty()) j["content_hash"] = content_hash;
  j["items"] = std::move(items);
  return j.dump(1, ' ', false, json::error_handler_t::strict) + "\n";
}

Manifest read_manifest(std::span<const std::byte> bytes, const std::string& name) {
  auto bad = [&](const std::string& what) -> void { throw Error(rules::kManifest, what, name); };
  json j;
  try {
    j = json::parse(reinterpret_cast<const char*>(bytes.data()),
                    reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const json::parse_error& e) {
    throw Error(rules::kManifest, std::string("not JSON: ") + e.what(), name, e.byte > 0 ? e.byte - 1 : 0);
  }
  if (!j.is_object() || j.value("format", json()) != dcp::kManifestFormat) bad("not a tensorseal.dcp manifest");
  if (j.value("version", json()) != dcp::kManifestVersion)
    bad(fmt::format("manifest version {} is not {}", j.value("version", json()).dump(), dcp::kManifestVersion));
  if (!j.contains("items") || !j["items"].is_array()) bad("no items list");
  Manifest out;
  for (const auto& row : j["items"]) {
    auto str = [&](const char* k) {
      if (!row.is_object() || !row.contains(k) || !row[k].is_string())
        bad(std::string("an item has no str '") + k + "'");
      return row[k].get<std::string>();
    };
    auto num = [&](const char* k) {
      if (!row.contains(k) || !row[k].is_number_unsigned()) bad(std::string("an item has no int '") + k + "'");
      return row[k].get<std::uint64_t>();
    };
    DcpRecord r;
    r.storage.relative_path = str("file");
    r.storage.offset = num("offset");
    r.storage.length = num("length");
    r.fqn = str("fqn");
    r.checksum = str("checksum");
    r.digest = str("digest");
    const json& off = row.contains("offsets") ? row["offsets"] : json();
    if (off.is_array()) {
      std::vector<std::int64_t> v;
      for (const auto& x : off) {
        if (!x.is_number_integer()) bad("item '" + r.fqn + "' has non-int offsets");
        v.push_back(x.get<std::int64_t>());
      }
      r.offsets = std::move(v);
    } else if (!off.is_null()) {
      bad("item '" + r.fqn + "' has offsets that are neither a list nor null");
    }
    out.items.push_back(std::move(r));
  }
  if (j.contains("content_hash")) {
    const json& h = j["content_hash"];
    if (!h.is_string() || !h.get<std::string>().starts_with("xxh3:") || h.get<std::string>().size() != 5 + 32)
      bad("content_hash is not an xxh3:<32 hex> digest");
    out.content_hash = h.get<std::string>();
  }
  return out;
}

}  // namespace tensorseal::detail::dcp
