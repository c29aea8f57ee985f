#include "hash/digest.h"

#include <openssl/evp.h>
#include <xxhash.h>
#if defined(__x86_64__)
// libxxhash exports runtime-dispatched XXH3 (SSE2 / AVX2 / AVX-512 chosen on first call);
// the plain entry points of Debian's build are SSE2 only, about half the speed on AVX2.
#include <xxh_x86dispatch.h>
#define TENSORSEAL_XXH3_128_UPDATE XXH3_128bits_update_dispatch
#define TENSORSEAL_XXH3_128 XXH3_128bits_dispatch
#else
#define TENSORSEAL_XXH3_128_UPDATE XXH3_128bits_update
#define TENSORSEAL_XXH3_128 XXH3_128bits
#endif

#include "tensorseal/error.h"

namespace tensorseal::detail::hash {

Digest::Digest(HashAlgo algo) : algo_(algo) {
  if (algo_ == HashAlgo::kSha256) {
    auto* ctx = EVP_MD_CTX_new();
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1)
      throw Error(rules::kInternal, "OpenSSL SHA-256 unavailable");
    state_ = ctx;
  } else {
    auto* st = XXH3_createState();
    if (st == nullptr) throw Error(rules::kInternal, "out of memory for XXH3 state");
    XXH3_128bits_reset(st);
    state_ = st;
  }
}

Digest::~Digest() {
  if (algo_ == HashAlgo::kSha256)
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(state_));
  else
    XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void Digest::update(std::span<const std::byte> data) {
  if (data.empty()) return;
  if (algo_ == HashAlgo::kSha256)
    EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(state_), data.data(), data.size());
  else
    TENSORSEAL_XXH3_128_UPDATE(static_cast<XXH3_state_t*>(state_), data.data(), data.size());
}

namespace {
std::string xxh128_bytes(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);  // big-endian canonical form, as xxhsum prints
  return std::string(reinterpret_cast<const char*>(c.digest), sizeof c.digest);
}
}  // namespace

std::string Digest::finish() {
  if (algo_ == HashAlgo::kSha256) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(state_), md, &n);
    return std::string(reinterpret_cast<const char*>(md), n);
  }
  return xxh128_bytes(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_)));
}

std::string Digest::oneshot(HashAlgo algo, std::span<const std::byte> data) {
  if (algo == HashAlgo::kSha256) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
    return std::string(reinterpret_cast<const char*>(md), n);
  }
  return xxh128_bytes(TENSORSEAL_XXH3_128(data.data(), data.size()));
}

}  // namespace tensorseal::detail::hash
