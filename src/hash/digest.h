// Streaming digests behind one interface: SHA-256 (OpenSSL) and XXH3-128 (xxHash).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tensorseal/hash.h"

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


}  // namespace tensorseal::detail::hash
