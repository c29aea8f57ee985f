// `verify`: read with every checksum on, validate every tensor view, recompute an
// embedded content hash. Errors become results, never exceptions.
#include "tensorseal/verify.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "api/formats.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tools/json.h"
#include "torch/constants.h"

namespace tensorseal {
namespace {

// The embedded content hash does not match the content: the tensors or values were
// changed after the hash was written (or the hash was).
inline constexpr Rule kContentHashMismatch{"verify/content-hash-mismatch", ErrorKind::kCorrupt};
// The embedded content hash is not "sha256:<64 hex>" or "xxh3:<32 hex>".
inline constexpr Rule kContentHashMalformed{"verify/content-hash-malformed", ErrorKind::kCorrupt};

// The content does not hash to the digest the caller expects (verify --expect).
inline constexpr Rule kExpectMismatch{"verify/expect-mismatch", ErrorKind::kCorrupt};

// The algorithm of a digest "sha256:<64 hex>" / "xxh3:<32 hex>", else nullopt.
std::optional<HashAlgo> digest_algo(std::string_view v) {
  auto hex = [](std::string_view h) {
    return std::all_of(h.begin(), h.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  if (v.starts_with("sha256:") && v.size() == 7 + 64 && hex(v.substr(7))) return HashAlgo::kSha256;
  if (v.starts_with("xxh3:") && v.size() == 5 + 32 && hex(v.substr(5))) return HashAlgo::kXxh3;
  return std::nullopt;
}

// The content hash embedded in the metadata (kContentHashMetadataKey), if any, and the
// algorithm it names.
std::optional<std::pair<std::string, HashAlgo>> embedded_hash(const Checkpoint& c) {
  if (!c.recorded_hash.empty()) {
    if (const auto algo = digest_algo(c.recorded_hash)) return std::pair{c.recorded_hash, *algo};
    throw Error(kContentHashMalformed, "the recorded content hash '" + c.recorded_hash + "' is not a content hash",
                c.file);
  }
  for (const auto& [k, v] : c.metadata) {
    if (k != kContentHashMetadataKey) continue;
    if (v.starts_with("sha256:") && v.size() == 7 + 64) return std::pair{v, HashAlgo::kSha256};
    if (v.starts_with("xxh3:") && v.size() == 5 + 32) return std::pair{v, HashAlgo::kXxh3};
    throw Error(kContentHashMalformed, "metadata " + std::string(k) + " = '" + v + "' is not a content hash", c.file);
  }
  return std::nullopt;
}

}  // namespace

std::string_view verify_status_name(VerifyStatus s) noexcept {
  switch (s) {
    case VerifyStatus::kOk:
      return "ok";
    case VerifyStatus::kCorrupt:
      return "corrupt";
    case VerifyStatus::kError:
      return "error";
  }
  return "?";
}

VerifyResult verify_file(const std::filesystem::path& path, const VerifyOptions& options) {
  VerifyResult r;
  r.file = path.string();
  try {
    std::optional<HashAlgo> expect_algo;
    if (!options.expect.empty()) {
      expect_algo = digest_algo(options.expect);
      if (!expect_algo)
        throw Error(rules::kInvalidArgument,
                    "--expect '" + options.expect + "' is not a content hash (sha256:<64 hex> or xxh3:<32 hex>)");
    }
    ReadOptions ro = options.read;
    ro.verify_checksums = true;
    // The tensor data's checksums are verified by the one pass over its bytes below.
    Checkpoint c = detail::api::read_file_deferred(path, ro);
    r.format = format_name(c.format);
    const auto tensors = collect_tensors(c.root);
    for (const auto& t : tensors) {
      try {
        t.tensor->validate();
      } catch (const Error& e) {
        // Name the tensor: the view's own error does not know its path.
        throw Error(Rule{e.rule(), e.kind()}, "tensor '" + t.path + "': " + e.detail(), c.file, e.offset());
      }
    }
    r.tensors = tensors.size();
    for (const auto& fact : c.facts) {
      if (fact.topic == detail::torch::topics::kCrcNotRecorded.id)
        r.warnings.push_back(
            "the archive records no CRC-32 checksums (saved with "
            "torch.serialization.set_crc32_options(False)): corruption of its records cannot be detected");
      if (fact.topic == detail::torch::topics::kCrcSkipped.id)
        r.warnings.push_back("storage records " + fact.value +
                             " record no CRC-32 checksum (saved under "
                             "torch.serialization.skip_data): their corruption cannot be detected");
      if (fact.topic == detail::torch::topics::kUnexpectedRecords.id)
        r.warnings.push_back("the archive holds records torch never reads (" + fact.value +
                             "); another loader might: tseal scan checks them");
    }
    const ScanReport globals = scan(c);
    r.globals = globals.verdict;
    for (const auto& f : globals.findings)
      if (f.verdict != Verdict::kSafe) r.unsafe_globals.push_back(f);
    // One pass over every tensor byte: each container checksum is verified as its
    // bytes are hashed (XXH3, or the embedded hash's algorithm to recompute it).
    const auto embedded = embedded_hash(c);
    HashOptions h;
    h.threads = options.threads;
    h.progress = options.progress;
    h.algo = embedded ? embedded->second : expect_algo ? *expect_algo : HashAlgo::kXxh3;
    const std::string actual = content_hash(c.root, h);
    r.content_hash = actual;
    if (embedded && actual != embedded->first)
      throw Error(kContentHashMismatch,
                  "embedded content hash " + embedded->first + " but the content hashes to " + actual, c.file);
    r.content_hash_checked = embedded.has_value();
    if (expect_algo) {
      // The checksums held in the pass above; a second algorithm rereads only memory.
      std::string got = actual;
      if (*expect_algo != h.algo) {
        HashOptions again = h;
        again.algo = *expect_algo;
        again.progress = {};
        got = content_hash(c.root, again);
      }
      r.content_hash = got;
      if (got != options.expect)
        throw Error(kExpectMismatch, "the content hashes to " + got + ", not the expected " + options.expect, c.file);
    }
    if (!options.signature.empty()) {
      if (options.public_key.empty())
        throw Error(rules::kInvalidArgument, "a signature is checked with a public key: give both", c.file);
      const auto bundle = MappedFile::open(options.signature);
      InspectOptions io;
      io.threads = options.threads;
      const std::string_view text(reinterpret_cast<const char*>(bundle->bytes().data()), bundle->size());
      try {
        r.signature = verify_signature(inspect(c, io), text, options.public_key);
      } catch (const Error& e) {
        // Bundle and signature errors are about the signature file; a content mismatch
        // names the checkpoint, a key error the key.
        if (e.file().empty()) throw e.located(options.signature.string());
        throw;
      }
    }
  } catch (const Error& e) {
    r.status = e.kind() == ErrorKind::kCorrupt ? VerifyStatus::kCorrupt : VerifyStatus::kError;
    r.message = e.what();
    r.rule = e.rule();
    if (e.offset() != kNoOffset) r.offset = e.offset();
  } catch (const std::bad_alloc&) {
    r.status = VerifyStatus::kError;
    r.message = r.file + ": out of memory";
    r.rule = "internal";
  }
  return r;
}

std::string to_json(const std::vector<VerifyResult>& results) {
  using detail::tools::ojson;
  ojson files = ojson::array();
  bool ok = true;
  for (const auto& r : results) {
    ok = ok && r.status == VerifyStatus::kOk;
    ojson e;
    e["file"] = r.file;
    e["status"] = verify_status_name(r.status);
    e["format"] = detail::tools::or_null_if_empty(r.format);
    e["tensors"] = r.tensors;
    e["content_hash_checked"] = r.content_hash_checked;
    e["content_hash"] = detail::tools::or_null_if_empty(r.content_hash);
    e["message"] = detail::tools::or_null_if_empty(r.message);
    e["rule"] = detail::tools::or_null_if_empty(r.rule);
    e["offset"] = r.offset ? ojson(*r.offset) : ojson(nullptr);
    e["globals"] = r.globals ? ojson(verdict_name(*r.globals)) : ojson(nullptr);
    ojson unsafe = ojson::array();
    for (const auto& f : r.unsafe_globals)
      unsafe.push_back({{"global", f.module + "." + f.name}, {"verdict", verdict_name(f.verdict)}, {"where", f.where}});
    e["unsafe_globals"] = std::move(unsafe);
    e["warnings"] = r.warnings;
    e["signature"] = r.signature ? ojson{{"key_type", r.signature->key_type},
                                         {"key_id", r.signature->key_id},
                                         {"content_hash", r.signature->content_hash}}
                                 : ojson(nullptr);
    files.push_back(std::move(e));
  }
  ojson j;
  j["ok"] = ok;
  j["files"] = std::move(files);
  return detail::tools::dump(j);
}

}  // namespace tensorseal
