// Streaming digests behind one interface: SHA-256 (OpenSSL) and XXH3-128 (xxHash).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tensorseal/hash.h"
#include "util/hex.h"

namespace tensorseal::detail::hash {

class Digest {
 public:
  explicit Digest(HashAlgo algo);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(std::span<const std::byte> data);
  void update(std::string_view s) { update({reinterpret_cast<const std::byte*>(s.data()), s.size()}); }
  // Raw digest bytes (32 for SHA-256, 16 for XXH3-128). Call once.
  std::string finish();

  static std::string oneshot(HashAlgo algo, std::span<const std::byte> data);
  static std::size_t size(HashAlgo algo) { return algo == HashAlgo::kSha256 ? 32 : 16; }

 private:
  HashAlgo algo_;
  void* state_ = nullptr;  // EVP_MD_CTX* or XXH3_state_t*
};

// A raw digest as tensorseal prints digests: "sha256:<hex>" or "xxh3:<hex>".
inline std::string digest_text(HashAlgo algo, std::string_view raw) {
  return std::string(algo == HashAlgo::kSha256 ? "sha256:" : "xxh3:") + util::to_hex(raw);
}

}  // namespace tensorseal::detail::hash
