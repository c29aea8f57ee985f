// tensorseal/verify.h — full validation of a checkpoint file (`tseal verify`).
//
// Reads the file with every checksum check on (ReadOptions::verify_checksums: zip
// CRC32s), validates every tensor view against its storage, and when the file carries
// a tensorseal content hash (metadata key "tensorseal.content_hash") recomputes it.
// Separately from integrity, it classes the globals the file's pickles reference
// (tensorseal::scan): an intact file can still be dangerous to load with pickle.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/export.h"
#include "tensorseal/progress.h"
#include "tensorseal/scan.h"
#include "tensorseal/sign.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class VerifyStatus : std::uint8_t {
  kOk,       // intact
  kCorrupt,  // breaks a rule of its format or a checksum (Error of kind kCorrupt)
  kError,    // unreadable: I/O, unknown format, unsupported feature, limits, unsafe
};
std::string_view verify_status_name(VerifyStatus s) noexcept;  // "ok", "corrupt", "error"

struct VerifyResult {
  std::string file;
  VerifyStatus status = VerifyStatus::kOk;
  std::string format;                   // detected format ("" when unreadable)
  std::size_t tensors = 0;              // tensors validated
  bool content_hash_checked = false;    // an embedded content hash was recomputed
  std::string content_hash;             // the content hash computed ("" when unreadable)
  std::string message;                  // the error's one-line message ("" when ok)
  std::string rule;                     // the broken rule id ("" when ok)
  std::optional<std::uint64_t> offset;  // byte offset of the problem, when known
  // The globals verdict (scan's: the worst global referenced), independent of
  // `status`; nullopt when the file could not be read. `unsafe_globals` holds scan's
  // findings that are not known-safe, in first-reference order.
  std::optional<Verdict> globals;
  std::vector<ScanFinding> unsafe_globals;
  // Things an intact file lacks or carries that a reader should know, one sentence
  // each: no CRCs recorded (torch.serialization.set_crc32_options(False)), records
  // torch never reads. They do not change `status`.
  std::vector<std::string> warnings;
  // With VerifyOptions::signature: the signer, when the signature verified and its
  // manifest matched the content.
  std::optional<SignatureCheck> signature;
};

struct VerifyOptions {
  // How verify_file reads (limits, format, in_memory, ...); every checksum is verified
  // whatever read.verify_checksums says.
  ReadOptions read;
  unsigned threads = 0;  // for the pass over the tensor data
  Progress progress;     // tensor bytes checked of all (tensorseal/progress.h)
  // With both set: also check the signature `signature` (a Sigstore bundle from
  // sign_statement) with the PEM public key `public_key`, and that the statement it
  // signs is this file's manifest (tensorseal/sign.h). A failure makes the file
  // kCorrupt with the sign/... rule (kError for an unreadable key).
  std::filesystem::path signature, public_key;
  // When set ("sha256:<64 hex>" or "xxh3:<32 hex>"): the content must hash to it, else
  // the file is kCorrupt with rule verify/expect-mismatch (a malformed digest: kError).
  std::string expect;
};

// The safetensors __metadata__ key under which a writer may embed the content hash
// (e.g. tensorseal.save(sd, "m.safetensors", metadata={"tensorseal.content_hash": h})):
// verify recomputes it. Other formats carry no metadata.
inline constexpr std::string_view kContentHashMetadataKey = "tensorseal.content_hash";

// Verifies one file. Never throws tensorseal::Error: failures are reported.
[[nodiscard]] VerifyResult verify_file(const std::filesystem::path& path, const VerifyOptions& options = {});

// Results as JSON (schema: docs/cli.md, "tseal verify --json").
[[nodiscard]] std::string to_json(const std::vector<VerifyResult>& results);

}  // namespace tensorseal
TENSORSEAL_API_END
