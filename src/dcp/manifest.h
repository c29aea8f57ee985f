// tensorseal.dcp's integrity manifest, ".tensorseal.json" beside .metadata:
//
//   {"format": "tensorseal.dcp", "version": 1,
//    "content_hash": "xxh3:<32 hex>",                     the whole checkpoint's (optional)
//    "items": [{"file": str, "offset": int, "length": int, "fqn": str,
//               "offsets": [int, ...] | null,          tensor chunk / BYTE_IO item
//               "checksum": "xxh3:<32 hex>",           XXH3-128 of the item's bytes
//               "digest": "xxh3:<32 hex>"}, ...]}      content_hash (XXH3) of its value
//
// Items in storage_data's order, keys in the fixed order above (indent 1), so
// the bytes depend only on the records. Stock DCP readers ignore the file.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tensorseal/dcp.h"

namespace tensorseal::detail::dcp {

struct Manifest {
  std::vector<DcpRecord> items;
  std::string content_hash;  // "" when the manifest records none (written before it did)
};

std::string encode_manifest(const std::vector<DcpRecord>& records, const std::string& content_hash = {});
// Throws Error dcp/manifest (with the byte offset of a JSON syntax error).
Manifest read_manifest(std::span<const std::byte> bytes, const std::string& name);
inline std::vector<DcpRecord> parse_manifest(std::span<const std::byte> bytes, const std::string& name) {
  return read_manifest(bytes, name).items;
}
// "xxh3:<hex>" of `bytes`.
std::string item_checksum(std::span<const std::byte> bytes);

}  // namespace tensorseal::detail::dcp
