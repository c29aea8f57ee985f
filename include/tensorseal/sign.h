// tensorseal/sign.h — manifests and signatures that survive a re-save (`tseal
// manifest`, `tseal sign`, `tseal verify --signature`; docs/signing.md).
//
// A manifest is an in-toto Statement v1 about the *content* of a checkpoint: its
// subject digest is the content hash, its predicate lists every tensor (path, dtype,
// shape, SHA-256 of the elements) sorted by path. It depends only on the content, so a
// file, its canonical copy, its safetensors conversion and its shards have the same
// manifest, and a signature over it survives `torch.save` -> `tseal canon` -> `convert`
// -> re-shard (a byte-level signature, like model-signing's file digests, does not).
// Signing wraps the statement in a DSSE envelope inside a Sigstore bundle (v0.3), signed
// with a local key through OpenSSL: Ed25519, or ECDSA P-256 / P-384 with SHA-256 /
// SHA-384 (DER signatures, as Sigstore writes them).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/error.h"
#include "tensorseal/export.h"
#include "tensorseal/inspect.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

inline constexpr std::string_view kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr std::string_view kManifestPredicateType = "https://tensorseal.dev/manifest/v1";
// The subject's digest key: the hex of the content hash (not a hash of any file's bytes).
inline constexpr std::string_view kContentDigestKey = "tensorseal-content-sha256";
inline constexpr std::string_view kDssePayloadType = "application/vnd.in-toto+json";
inline constexpr std::string_view kBundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json";

namespace rules {
// A key file that cannot be read, is not a PEM key, or is of a type tensorseal does not sign with.
inline constexpr Rule kSignKey{"sign/key", ErrorKind::kInvalidArgument};
// A signature file that is not a Sigstore bundle holding a DSSE in-toto statement.
inline constexpr Rule kSignBundle{"sign/bundle", ErrorKind::kCorrupt};
// The signature does not verify with the given public key.
inline constexpr Rule kSignSignature{"sign/signature", ErrorKind::kCorrupt};
// The signed statement is not a tensorseal manifest.
inline constexpr Rule kSignStatement{"sign/statement", ErrorKind::kCorrupt};
// The checkpoint's content differs from the signed manifest.
inline constexpr Rule kSignContent{"sign/content-mismatch", ErrorKind::kCorrupt};
}  // namespace rules

// The manifest statement of an inspected checkpoint (InspectReport: SHA-256 content
// hash and per-tensor digests), as JSON with a fixed key order and two-space indent,
// ending in a newline. `name` is the subject's name (not part of what is compared).
[[nodiscard]] std::string manifest_statement(const InspectReport& report, std::string_view name = "checkpoint");

// A Sigstore bundle (JSON) whose DSSE envelope holds `statement`, signed with the
// unencrypted PEM private key at `private_key` (PKCS#8 or traditional). Ed25519
// signatures are deterministic; ECDSA ones are not (the bundle's bytes then differ
// from run to run, and every one verifies). Throws kSignKey.
[[nodiscard]] std::string sign_statement(std::string_view statement, const std::filesystem::path& private_key);

struct SignatureCheck {
  std::string key_type;      // "ed25519", "ecdsa-p256", "ecdsa-p384"
  std::string key_id;        // hex SHA-256 of the public key's DER (SubjectPublicKeyInfo)
  std::string content_hash;  // what the statement signs ("sha256:<hex>")
  std::string statement;     // the signed statement (the envelope's payload)
};

// Verifies `bundle` with the PEM public key at `public_key` and checks that its
// statement is the manifest of `actual`. Throws kSignKey, kSignBundle, kSignSignature,
// kSignStatement, or kSignContent naming the tensors that differ (at most 8 named).
[[nodiscard]] SignatureCheck verify_signature(const InspectReport& actual, std::string_view bundle,
                                              const std::filesystem::path& public_key);

// The public key's identity as verify_signature reports it (for `tseal sign`'s output).
[[nodiscard]] SignatureCheck key_identity(const std::filesystem::path& pem_key);

}  // namespace tensorseal
TENSORSEAL_API_END
