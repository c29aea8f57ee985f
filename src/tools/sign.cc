// Manifests (in-toto statements over the content) and their signatures (DSSE envelopes
// in Sigstore bundles), with OpenSSL for the keys and signatures.
//
// DSSE (github.com/secure-systems-lab/dsse, protocol.md): the signature is over
//   PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
// with LEN the decimal byte count; payload and sig are base64 (standard alphabet,
// padded) in the envelope.
#include "tensorseal/sign.h"

#include <fmt/format.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "tensorseal/hash.h"
#include "tools/json.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using detail::tools::ojson;

constexpr std::uint64_t kMaxKeyFile = 1 << 20;    // PEM keys are a few hundred bytes
constexpr std::uint64_t kMaxBundle = 1ull << 30;  // a manifest of ~10M tensors

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::string read_small_file(const fs::path& p, std::uint64_t max, const Rule& rule, std::string_view what) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) throw Error(rule, "cannot read the " + std::string(what) + ": " + ec.message(), p.string());
  if (size > max) throw Error(rule, fmt::format("the {} is {} bytes, more than {}", what, size, max), p.string());
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (f == nullptr) throw Error(rule, "cannot open the " + std::string(what), p.string());
  std::string out(size, '\0');
  const std::size_t n = std::fread(out.data(), 1, out.size(), f);
  std::fclose(f);
  if (n != out.size()) throw Error(rule, "cannot read the " + std::string(what), p.string());
  return out;
}

// Encrypted keys are refused (no prompt): the callback gives no password.
int no_password(char*, int, int, void*) { return -1; }

// The key in `pem` (the text of the file `path`, named in errors).
Pkey parse_key(const std::string& pem, const fs::path& path, bool is_private) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw Error(rules::kInternal, "out of memory");
  Pkey key(is_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr)
                      : PEM_read_bio_PUBKEY(bio.get(), nullptr, no_password, nullptr));
  if (!key)
    throw Error(rules::kSignKey,
                is_private ? "not an unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)"
                           : "not a PEM public key (-----BEGIN PUBLIC KEY-----)",
                path.string());
  return key;
}

Pkey load_key(const fs::path& path, bool is_private) {
  return parse_key(read_small_file(path, kMaxKeyFile, rules::kSignKey, is_private ? "private key" : "public key"), path,
                   is_private);
}

// "ed25519", "ecdsa-p256" or "ecdsa-p384"; anything else is refused.
std::string key_type(EVP_PKEY* key, const fs::path& path) {
  const int id = EVP_PKEY_get_base_id(key);
  if (id == EVP_PKEY_ED25519) return "ed25519";
  if (id == EVP_PKEY_EC) {
    char group[64] = {};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) == 1) {
      const std::string g(group, len);
      if (g == "prime256v1" || g == "P-256") return "ecdsa-p256";
      if (g == "secp384r1" || g == "P-384") return "ecdsa-p384";
      throw Error(rules::kSignKey, "an ECDSA key on curve " + g + "; tensorseal signs with P-256 or P-384",
                  path.string());
    }
  }
  throw Error(rules::kSignKey,
              std::string("a ") + OBJ_nid2sn(id) + " key; tensorseal signs with Ed25519 or ECDSA P-256/P-384",
              path.string());
}

const EVP_MD* digest_for(const std::string& type) {
  if (type == "ecdsa-p256") return EVP_sha256();
  if (type == "ecdsa-p384") return EVP_sha384();
  return nullptr;  // Ed25519 signs the message itself
}

std::string key_id(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(key, &der);
  if (n <= 0) throw Error(rules::kInternal, "cannot encode a public key");
  const std::string id = sha256_hex({reinterpret_cast<const std::byte*>(der), static_cast<std::size_t>(n)});
  OPENSSL_free(der);
  return id;
}

std::string pae(std::string_view type, std::string_view body) {
  return "DSSEv1 " + std::to_string(type.size()) + " " + std::string(type) + " " + std::to_string(body.size()) + " " +
         std::string(body);
}

std::string base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// Standard padded base64; nullopt for anything else (EVP_DecodeBlock alone would
// accept whitespace and return the padding as zero bytes).
std::optional<std::string> unbase64(std::string_view in) {
  if (in.size() % 4 != 0 || in.size() > (1u << 31)) return std::nullopt;
  std::size_t pad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    const bool alnum =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (c == '=' && i + 2 >= in.size())
      ++pad;
    else if (!alnum || pad)
      return std::nullopt;
  }
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0 || static_cast<std::size_t>(n) < pad) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

std::string sign_bytes(EVP_PKEY* key, const std::string& type, std::string_view message) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  std::size_t len = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(message.data());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, digest_for(type), nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, data, message.size()) != 1)
    throw Error(rules::kSignKey, "OpenSSL cannot sign with this " + type + " key");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, data, message.size()) != 1)
    throw Error(rules::kSignKey, "OpenSSL cannot sign with this " + type + " key");
  sig.resize(len);
  return sig;
}

bool verify_bytes(EVP_PKEY* key, const std::string& type, std::string_view message, std::string_view sig) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, digest_for(type), nullptr, key) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

const nlohmann::json* member(const nlohmann::json& j, const char* key, nlohmann::json::value_t type) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->type() != type) return nullptr;
  return &*it;
}

std::string string_member(const nlohmann::json& j, const char* key, const Rule& rule, std::string_view where) {
  const auto* v = member(j, key, nlohmann::json::value_t::string);
  if (v == nullptr) throw Error(rule, std::string(where) + " has no string \"" + key + "\"");
  return v->get<std::string>();
}

struct SignedTensor {
  std::string dtype, sha256;
  std::vector<std::int64_t> shape;
  bool operator==(const SignedTensor&) const = default;
};

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::string manifest_statement(const InspectReport& r, std::string_view name) {
  if (!r.content_hash.starts_with("sha256:"))
    throw Error(rules::kInvalidArgument, "a manifest names the SHA-256 content hash, not " + r.content_hash, r.file);
  std::vector<const InspectTensor*> sorted;
  for (const auto& t : r.tensors) sorted.push_back(&t);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->path < b->path; });
  ojson tensors = ojson::array();
  for (const auto* t : sorted)
    tensors.push_back({{"path", t->path},
                       {"dtype", std::string(tensorseal::name(t->dtype))},
                       {"shape", t->shape},
                       {"sha256", t->sha256}});
  ojson j;
  j["_type"] = kStatementType;
  j["subject"] =
      ojson::array({{{"name", name}, {"digest", {{std::string(kContentDigestKey), r.content_hash.substr(7)}}}}});
  j["predicateType"] = kManifestPredicateType;
  j["predicate"] = {{"content_hash", r.content_hash}, {"tensors", std::move(tensors)}};
  return detail::tools::dump(j) + "\n";
}

SignatureCheck key_identity(const fs::path& pem_key) {
  // A private key file names its public half too.
  const std::string pem = read_small_file(pem_key, kMaxKeyFile, rules::kSignKey, "key");
  Pkey key = parse_key(pem, pem_key, pem.find("PRIVATE KEY-----") != std::string::npos);
  SignatureCheck out;
  out.key_type = key_type(key.get(), pem_key);
  out.key_id = key_id(key.get());
  return out;
}

std::string sign_statement(std::string_view statement, const fs::path& private_key) {
  Pkey key = load_key(private_key, true);
  const std::string type = key_type(key.get(), private_key);
  const std::string id = key_id(key.get());
  const std::string sig = sign_bytes(key.get(), type, pae(kDssePayloadType, statement));
  ojson sigs = ojson::array({{{"sig", base64(sig)}, {"keyid", id}}});
  ojson j;
  j["mediaType"] = kBundleMediaType;
  j["verificationMaterial"] = {{"publicKey", {{"hint", id}}}};
  j["dsseEnvelope"] = {
      {"payload", base64(statement)}, {"payloadType", kDssePayloadType}, {"signatures", std::move(sigs)}};
  return detail::tools::dump(j) + "\n";
}

SignatureCheck verify_signature(const InspectReport& actual, std::string_view bundle_text, const fs::path& public_key) {
  using V = nlohmann::json::value_t;
  Pkey key = load_key(public_key, false);
  SignatureCheck out;
  out.key_type = key_type(key.get(), public_key);
  out.key_id = key_id(key.get());

  if (bundle_text.size() > kMaxBundle)
    throw Error(rules::kSignBundle, fmt::format("the signature bundle is {} bytes, over the {} a manifest needs",
                                                bundle_text.size(), kMaxBundle));
  const auto bundle = nlohmann::json::parse(bundle_text, nullptr, false);
  if (bundle.is_discarded()) throw Error(rules::kSignBundle, "the signature is not JSON");
  const std::string media = string_member(bundle, "mediaType", rules::kSignBundle, "the bundle");
  if (!media.starts_with("application/vnd.dev.sigstore.bundle"))
    throw Error(rules::kSignBundle, "mediaType '" + media + "' is not a Sigstore bundle");
  const auto* env = member(bundle, "dsseEnvelope", V::object);
  if (env == nullptr) throw Error(rules::kSignBundle, "the bundle holds no dsseEnvelope");
  const std::string type = string_member(*env, "payloadType", rules::kSignBundle, "the envelope");
  if (type != kDssePayloadType)
    throw Error(rules::kSignBundle, "payloadType '" + type + "' is not " + std::string(kDssePayloadType));
  const auto payload = unbase64(string_member(*env, "payload", rules::kSignBundle, "the envelope"));
  if (!payload) throw Error(rules::kSignBundle, "the envelope's payload is not base64");
  const auto* sigs = member(*env, "signatures", V::array);
  if (sigs == nullptr || sigs->empty()) throw Error(rules::kSignBundle, "the envelope holds no signatures");
  const std::string message = pae(type, *payload);
  bool verified = false;
  for (const auto& s : *sigs) {
    const auto sig = unbase64(string_member(s, "sig", rules::kSignBundle, "a signature"));
    if (!sig) throw Error(rules::kSignBundle, "a signature is not base64");
    verified = verified || verify_bytes(key.get(), out.key_type, message, *sig);
  }
  if (!verified)
    throw Error(rules::kSignSignature, "the signature does not verify with the " + out.key_type + " key " +
                                           out.key_id.substr(0, 16) + " (" + public_key.string() + ")");
  out.statement = *payload;

  // The statement: a tensorseal manifest whose subject names its content hash.
  const auto st = nlohmann::json::parse(*payload, nullptr, false);
  if (st.is_discarded()) throw Error(rules::kSignStatement, "the signed payload is not JSON");
  if (string_member(st, "_type", rules::kSignStatement, "the statement") != kStatementType ||
      string_member(st, "predicateType", rules::kSignStatement, "the statement") != kManifestPredicateType)
    throw Error(rules::kSignStatement,
                "the signed statement is not a tensorseal manifest (" + std::string(kManifestPredicateType) + ")");
  const auto* pred = member(st, "predicate", V::object);
  const auto* subjects = member(st, "subject", V::array);
  if (pred == nullptr || subjects == nullptr || subjects->size() != 1)
    throw Error(rules::kSignStatement, "the statement needs one subject and a predicate");
  out.content_hash = string_member(*pred, "content_hash", rules::kSignStatement, "the predicate");
  const auto* digest = member((*subjects)[0], "digest", V::object);
  if (digest == nullptr || !out.content_hash.starts_with("sha256:") ||
      string_member(*digest, std::string(kContentDigestKey).c_str(), rules::kSignStatement, "the subject digest") !=
          out.content_hash.substr(7))
    throw Error(rules::kSignStatement, "the subject's digest is not the predicate's content hash");
  const auto* tensors = member(*pred, "tensors", V::array);
  if (tensors == nullptr) throw Error(rules::kSignStatement, "the predicate lists no tensors");
  std::map<std::string, SignedTensor> signed_tensors, actual_tensors;
  for (const auto& t : *tensors) {
    SignedTensor s{string_member(t, "dtype", rules::kSignStatement, "a tensor"),
                   string_member(t, "sha256", rules::kSignStatement, "a tensor"),
                   {}};
    const auto* shape = member(t, "shape", V::array);
    if (shape == nullptr) throw Error(rules::kSignStatement, "a tensor has no shape");
    for (const auto& d : *shape) {
      if (!d.is_number_integer()) throw Error(rules::kSignStatement, "a tensor's shape is not integers");
      s.shape.push_back(d.get<std::int64_t>());
    }
    if (!signed_tensors.emplace(string_member(t, "path", rules::kSignStatement, "a tensor"), std::move(s)).second)
      throw Error(rules::kSignStatement, "the statement lists a tensor path twice");
  }
  for (const auto& t : actual.tensors)
    actual_tensors.emplace(t.path, SignedTensor{std::string(name(t.dtype)), t.sha256, t.shape});
  if (out.content_hash == actual.content_hash && signed_tensors == actual_tensors) return out;

  // Name what differs, in path order.
  std::vector<std::string> diffs;
  for (const auto& [path, s] : signed_tensors) {
    auto it = actual_tensors.find(path);
    if (it == actual_tensors.end())
      diffs.push_back("'" + path + "' (missing)");
    else if (it->second.dtype != s.dtype)
      diffs.push_back("'" + path + "' (dtype " + s.dtype + " -> " + it->second.dtype + ")");
    else if (it->second.shape != s.shape)
      diffs.push_back("'" + path + "' (shape " + shape_str(s.shape) + " -> " + shape_str(it->second.shape) + ")");
    else if (it->second.sha256 != s.sha256)
      diffs.push_back("'" + path + "' (values changed)");
  }
  for (const auto& [path, t] : actual_tensors)
    if (!signed_tensors.count(path)) diffs.push_back("'" + path + "' (not signed)");
  if (diffs.empty())
    throw Error(rules::kSignContent,
                "every tensor matches, but the non-tensor values differ: content hash " + actual.content_hash +
                    ", signed " + out.content_hash,
                actual.file);
  std::string list;
  for (std::size_t i = 0; i < diffs.size() && i < 8; ++i) list += (i ? ", " : "") + diffs[i];
  if (diffs.size() > 8) list += ", ...";
  throw Error(rules::kSignContent, fmt::format("{} tensor(s) differ from the signed manifest: {}", diffs.size(), list),
              actual.file);
}

}  // namespace tensorseal
