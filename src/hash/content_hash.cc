// The content hash. Definition (stable forever; docs/content-hash.md is the spec and
// tests/cpp/content_hash_test.cc pins golden vectors):
//
//   content_hash = ALGO("tensorseal/content/v1\n" || enc(root))
//
//   enc(None)   = 'N'
//   enc(bool)   = 'B' u8(0|1)
//   enc(int)    = 'I' u32(len) two's-complement little-endian, minimal length (0 -> len 0)
//   enc(float)  = 'F' u64 IEEE-754 bits, little-endian
//   enc(complex)= 'C' u64 real bits, u64 imag bits (little-endian; added after v1's
//                 first release: a new tag, no existing encoding changed)
//   enc(str)    = 'S' u64(len) UTF-8 bytes
//   enc(bytes)  = 'Y' u64(len) bytes            (bytes and bytearray alike)
//   enc(list)   = 'L' u64(n) enc(item)*
//   enc(tuple)  = 'T' u64(n) enc(item)*
//   enc(dict)   = 'D' u64(n) (enc(key) enc(value))*, entries sorted by enc(key) bytewise;
//                 dict/OrderedDict/Counter alike, attributes (OrderedDict._metadata) excluded
//   enc(set)    = 'E' u64(n) enc(item)* sorted bytewise (set and frozenset alike)
//   enc(tensor) = 'X' u8(len) dtype-name u32(ndim) i64(dim)* u8(flags) leaf
//                 flags: bit0 requires_grad, bit1 nn.Parameter, bit2 numpy.ndarray,
//                 bit3 numpy scalar (bits 2-3 added later: a pickled numpy object had
//                 hashed as a tensor; no tree without one changes), bit4 Python
//                 attributes (added later: enc(dict attributes) follows the flags;
//                 before, such a tensor was an opaque object)
//   enc(tensor) with bit4: 'X' ... u8(flags) enc(attributes) leaf
//   enc(qtensor)= 'Q' u8(len) dtype-name u32(ndim) i64(dim)* u8(flags) enc(params) leaf
//                 a quantized tensor (added later: before, such a tensor was an opaque
//                 object); params = ("per_tensor_affine", float scale, int zero_point)
//                 or (scheme name, tensor scales, tensor zero_points, int axis);
//                 leaf over the integer representation
//   enc(storage)= 'R' u8(len) dtype-name leaf
//   enc(global) = 'G' enc(str module) enc(str name)
//   enc(object) = 'O' u8(construct) enc(callable) enc(args|None) enc(kwargs|None)
//                 enc(state|None) 'L'-encoded list items, 'D'-style dict items in order
//   enc(node on the path) = 'P' u64(d)   a container or object reached again inside
//                 itself (recursive values; added later: no acyclic tree changes):
//                 d = 0 for the innermost container being encoded, 1 for its parent...
//                 Refs are followed like any edge; the encoding depends only on the
//                 graph and the root, not on which edges a reader made Refs.
//   leaf        = ALGO("tensorseal/tensor/v1\n" || u64(nbytes) || ALGO(chunk)*)
//                 over the element bytes in row-major little-endian order, cut into
//                 1 MiB chunks (the last may be shorter; none when nbytes == 0).
//
// Chunked leaves let one large tensor be hashed on every core; the result does not
// depend on the thread count, on strides, on storage sharing or on the file layout.
//
// Pending checksums (Storage::pending_checksum, left by a reader for hash_file): each
// checksum's covered bytes are tiled exactly by pieces: the hash chunks that lie in
// them (front to back, without overlap) and, for bytes no chunk covers (slack,
// strided or shared views), CRC-only pieces of at most 1 MiB. A fused job checksums
// its chunk and then hashes it while it is in cache, so the data is read from memory
// once; the piece CRCs are combined per checksum (util::crc32_combine) and checked
// before any digest is formed. A mismatch throws the reader's own error.
#include "hash/content_hash.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "hash/digest.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "util/hex.h"
#include "util/parallel.h"
#include "util/progress.h"

namespace tensorseal {
namespace {

using detail::hash::Digest;

constexpr std::uint64_t kChunk = detail::hash::kLeafChunk;
constexpr std::string_view kContentDomain = "tensorseal/content/v1\n";
constexpr std::string_view kTensorDomain = "tensorseal/tensor/v1\n";

// One unit of hashing work: a chunk of a contiguous run, or a whole gathered tensor.
struct Job {
  std::size_t leaf;                  // index into leaves
  std::size_t chunk;                 // chunk index within the leaf
  std::span<const std::byte> bytes;  // empty for gathered tensors and split chunks
  bool split = false;                // the chunk spans runs of Leaf::runs: copied together first
  bool streamed = false;             // every chunk of a leaf over a streamed storage, as it streams
};

struct Leaf {
  const Tensor* tensor = nullptr;  // null for bare storages
  const Storage* storage = nullptr;
  std::uint64_t nbytes = 0;
  std::vector<std::span<const std::byte>> runs;  // a contiguous tensor over a pieced storage
  std::vector<std::uint64_t> run_ends;           // offset after each run
  std::vector<std::string> chunk_digests;
  std::string digest;
};

// A run of a record's bytes whose CRC32 is computed on its own, then combined.
struct CrcPiece {
  std::size_t check;  // index into the checks
  std::span<const std::byte> bytes;
  std::uint32_t crc = 0;
};

class ContentHasher {
 public:
  // `meter`: count the bytes on a meter the caller owns (and finishes) instead of one
  // made here from options.progress.
  explicit ContentHasher(const HashOptions& o, detail::util::ProgressMeter* meter = nullptr) : opt_(o), meter_(meter) {}

  // Bytes hash_leaves will read for `root` (each leaf once; no checksum gaps).
  std::uint64_t planned_bytes(const Value& root) {
    plan(root, 0);
    std::uint64_t n = 0;
    for (const Leaf& l : leaves_) n += l.nbytes;
    return n;
  }

  std::string run(const Value& root) {
    plan(root, 0);
    hash_leaves();
    for (const auto& e : failed_)
      if (e) std::rethrow_exception(e);  // the first failed checksum, in leaf order
    return digest_of(root);
  }

  // enc(root) (the bytes hashed under the content domain), its leaves hashed first.
  std::string encoding(const Value& root) {
    plan(root, 0);
    hash_leaves();
    for (const auto& e : failed_)
      if (e) std::rethrow_exception(e);
    std::string enc;
    encode(root, enc);
    return enc;
  }

  // Tensor nodes whose encodings are given (not hashed here): see content_hash_encoded.
  void set_encoded(const std::unordered_map<const Tensor*, std::string>* e) { encoded_ = e; }
  // Receives every tensor's leaf chunk digests: see content_hash_chunks.
  void set_chunks_out(std::unordered_map<const Tensor*, std::vector<std::string>>* c) { chunks_out_ = c; }
  // Receives tensor_sha256 of every tensor leaf hashed as a stream: see content_hash.
  void set_streamed_sha256_out(std::unordered_map<const Tensor*, std::string>* o) { streamed_sha256_ = o; }
  // Leaf chunk digests known already: see content_hash_known.
  void set_known(const std::unordered_map<const Tensor*, std::vector<std::string>>* k) { known_ = k; }

  // The hashes of several trees (files) at once: one job list over all their leaves,
  // so every core works whatever the sizes. A tree whose checksum fails gets that
  // error instead of a digest; the others are unaffected. Trees share no leaves.
  std::vector<std::string> run_many(const std::vector<const Value*>& roots, std::vector<std::exception_ptr>& errors) {
    for (std::size_t r = 0; r < roots.size(); ++r) {
      plan(*roots[r], 0);
      check_root_.resize(checks_.size(), r);
    }
    hash_leaves();
    std::vector<std::string> out(roots.size());
    errors.assign(roots.size(), nullptr);
    for (std::size_t i = 0; i < failed_.size(); ++i)
      if (failed_[i] && !errors[check_root_[i]]) errors[check_root_[i]] = failed_[i];
    for (std::size_t r = 0; r < roots.size(); ++r)
      if (!errors[r]) out[r] = digest_of(*roots[r]);
    return out;
  }

 private:
  // Pass 1: find every tensor/storage leaf once.
  void plan(const Value& v, int depth) {
    using K = Value::Kind;
    if (depth > 100000) throw Error(rules::kInternal, "value tree too deep to hash");
    switch (v.kind()) {
      case K::kTensor: {
        const Tensor* t = v.as_tensor().get();
        if (t->attributes) plan(*t->attributes, depth + 1);
        if (encoded_ != nullptr && encoded_->count(t)) return;
        add_leaf(t, nullptr);
        if (t->quantization && t->quantization->per_channel()) {
          add_leaf(t->quantization->scales.get(), nullptr);
          add_leaf(t->quantization->zero_points.get(), nullptr);
        }
        return;
      }
      case K::kStorage:
        add_leaf(nullptr, v.as_storage().get());
        return;
      case K::kRef:
        has_refs_ = true;
        return;  // the target is reached through owning edges too
      case K::kList:
      case K::kTuple:
        for (const auto& x : v.items()) plan(x, depth + 1);
        return;
      case K::kSet:
        for (const auto& x : v.as_set().items) plan(x, depth + 1);
        return;
      case K::kDict:
        for (const auto& [k, x] : v.as_dict().items) {
          plan(k, depth + 1);
          plan(x, depth + 1);
        }
        return;
      case K::kObject: {
        const Object& o = v.as_object();
        for (const auto* p : {&o.callable, &o.args, &o.kwargs, &o.state})
          if (*p) plan(**p, depth + 1);
        for (const auto& x : o.list_items) plan(x, depth + 1);
        for (const auto& [k, x] : o.dict_items) {
          plan(k, depth + 1);
          plan(x, depth + 1);
        }
        return;
      }
      default:
        return;
    }
  }

  void add_leaf(const Tensor* t, const Storage* s) {
    const void* key = t ? static_cast<const void*>(t) : static_cast<const void*>(s);
    if (index_.count(key)) return;
    index_[key] = leaves_.size();
    Leaf leaf;
    leaf.tensor = t;
    leaf.storage = s;
    leaf.nbytes = t ? t->nbytes() : s->size();
    leaves_.push_back(std::move(leaf));
    const Storage& storage = t ? *t->storage : *s;
    if (const auto& p = storage.pending_checksum(); p && pending_seen_.insert(p.get()).second)
      checks_.push_back(p.get());
    // A conj/neg view's values are computed from its raw storage: that record's bytes.
    if (t && t->lazy)
      if (const auto& p = t->lazy->raw->pending_checksum(); p && pending_seen_.insert(p.get()).second)
        checks_.push_back(p.get());
  }

  void hash_leaves() {
    std::vector<Job> jobs;
    for (std::size_t i = 0; i < leaves_.size(); ++i) {
      Leaf& l = leaves_[i];
      const std::uint64_t chunks = (l.nbytes + kChunk - 1) / kChunk;
      l.chunk_digests.resize(chunks);
      std::span<const std::byte> bytes;
      bool contiguous = true;
      const bool in_order = l.storage || l.tensor->is_contiguous() || info(l.tensor->dtype).bits % 8 != 0;
      if (in_order && (l.storage ? *l.storage : *l.tensor->storage).is_streamed()) {
        // Decoded (inflated) as it is read: one job hashes its chunks as they come.
        jobs.push_back({i, 0, {}, false, true});
        continue;
      }
      if (l.storage)
        bytes = l.storage->bytes();
      else if (l.tensor->is_contiguous() || info(l.tensor->dtype).bits % 8 != 0) {
        l.tensor->for_each_run([&](std::span<const std::byte> r) { l.runs.push_back(r); });
        if (l.runs.size() == 1) bytes = l.runs[0];
      } else
        contiguous = false;
      if (!contiguous) {
        jobs.push_back({i, 0, {}});
        continue;
      }
      if (l.runs.size() > 1) {  // pieces: a chunk inside one run is hashed in place
        for (const auto& run : l.runs) l.run_ends.push_back((l.run_ends.empty() ? 0 : l.run_ends.back()) + run.size());
        std::size_t r = 0;
        std::uint64_t run_start = 0;
        for (std::uint64_t c = 0; c < chunks; ++c) {
          const std::uint64_t lo = c * kChunk, n = std::min(kChunk, l.nbytes - lo);
          while (lo >= run_start + l.runs[r].size()) run_start += l.runs[r++].size();
          if (lo + n <= run_start + l.runs[r].size())
            jobs.push_back({i, c, l.runs[r].subspan(lo - run_start, n)});
          else
            jobs.push_back({i, c, {}, true});
        }
        continue;
      }
      l.runs.clear();
      for (std::uint64_t c = 0; c < chunks; ++c)
        jobs.push_back({i, c, bytes.subspan(c * kChunk, std::min(kChunk, l.nbytes - c * kChunk))});
    }
    if (known_ != nullptr) {
      // Chunks whose digests are known are not read (a gathered strided tensor is).
      std::vector<Job> todo;
      for (Job& j : jobs) {
        Leaf& l = leaves_[j.leaf];
        const auto it = l.tensor ? known_->find(l.tensor) : known_->end();
        const bool gathered = !j.split && j.bytes.empty();
        if (it != known_->end() && !gathered && j.chunk < it->second.size() && !it->second[j.chunk].empty())
          l.chunk_digests[j.chunk] = it->second[j.chunk];
        else
          todo.push_back(j);
      }
      jobs = std::move(todo);
    }
    std::vector<CrcPiece> pieces;
    std::vector<std::size_t> fused(jobs.size(), kNoPiece), crc_only;
    if (!checks_.empty()) tile_records(jobs, pieces, fused, crc_only);
    std::optional<detail::util::ProgressMeter> own;
    detail::util::ProgressMeter* meter = meter_;
    if (meter == nullptr && opt_.progress) {
      std::uint64_t total = 0;
      for (const Leaf& l : leaves_) total += l.nbytes;
      for (std::size_t k : crc_only) total += pieces[k].bytes.size();
      meter = &own.emplace(&opt_.progress, total);
    }
    detail::util::parallel_for(jobs.size() + crc_only.size(), opt_.threads, [&](std::size_t j) {
      if (j >= jobs.size()) {
        CrcPiece& p = pieces[crc_only[j - jobs.size()]];
        p.crc = detail::util::crc32(0, p.bytes);
        if (meter) meter->add(p.bytes.size());
        return;
      }
      const Job& job = jobs[j];
      Leaf& l = leaves_[job.leaf];
      if (job.streamed) {
        hash_streamed(l, meter);
        return;
      }
      if (job.split) {
        const std::uint64_t lo = job.chunk * kChunk, n = std::min(kChunk, l.nbytes - lo);
        std::vector<std::byte> joined;
        joined.reserve(n);
        // The first run ending after lo, then on until lo + n.
        auto r =
            static_cast<std::size_t>(std::upper_bound(l.run_ends.begin(), l.run_ends.end(), lo) - l.run_ends.begin());
        for (; r < l.runs.size() && joined.size() < n; ++r) {
          const std::uint64_t at = l.run_ends[r] - l.runs[r].size();
          const std::uint64_t from = lo > at ? lo - at : 0;
          const std::uint64_t to = std::min<std::uint64_t>(l.runs[r].size(), lo + n - at);
          joined.insert(joined.end(), l.runs[r].begin() + static_cast<std::ptrdiff_t>(from),
                        l.runs[r].begin() + static_cast<std::ptrdiff_t>(to));
        }
        l.chunk_digests[job.chunk] = Digest::oneshot(opt_.algo, joined);
        if (meter) meter->add(n);
        return;
      }
      if (fused[j] != kNoPiece) pieces[fused[j]].crc = detail::util::crc32(0, job.bytes);  // then hashed from cache
      if (!job.bytes.empty() || l.tensor == nullptr || l.tensor->is_contiguous()) {
        l.chunk_digests[job.chunk] = Digest::oneshot(opt_.algo, job.bytes);
        if (meter) meter->add(job.bytes.size());
        return;
      }
      std::vector<std::byte> scratch;  // strided view: gather, then chunk
      auto bytes = l.tensor->contiguous_bytes(scratch);
      for (std::size_t c = 0; c < l.chunk_digests.size(); ++c)
        l.chunk_digests[c] =
            Digest::oneshot(opt_.algo, bytes.subspan(c * kChunk, std::min(kChunk, l.nbytes - c * kChunk)));
      if (meter) meter->add(l.nbytes);
    });
    if (own) own->finish();
    if (!checks_.empty()) {
      // Pieces are in order within each checksum's bytes; one without pieces is empty.
      std::vector<std::uint32_t> crcs(checks_.size(), 0);
      for (const CrcPiece& p : pieces)
        crcs[p.check] = detail::util::crc32_combine(crcs[p.check], p.crc, p.bytes.size());
      failed_.assign(checks_.size(), nullptr);
      for (std::size_t i = 0; i < checks_.size(); ++i) {
        try {
          checks_[i]->check(crcs[i]);
        } catch (...) {
          failed_[i] = std::current_exception();
        }
      }
    }
    for (Leaf& l : leaves_) {
      l.digest = detail::hash::leaf_digest(opt_.algo, l.nbytes, l.chunk_digests);
      if (chunks_out_ != nullptr && l.tensor != nullptr) (*chunks_out_)[l.tensor] = std::move(l.chunk_digests);
      l.chunk_digests.clear();
    }
  }

  static constexpr std::size_t kNoPiece = static_cast<std::size_t>(-1);

  // Every chunk digest of a leaf whose bytes stream (Storage::is_streamed), in order:
  // memory is one chunk's digest state, whatever the leaf's size. The stream's own
  // checks (a zip member's CRC-32) throw before this returns.
  void hash_streamed(Leaf& l, detail::util::ProgressMeter* meter) {
    std::optional<Digest> d, whole;
    if (streamed_sha256_ != nullptr && l.tensor != nullptr) whole.emplace(HashAlgo::kSha256);
    std::uint64_t in_chunk = 0;
    std::size_t c = 0;
    auto feed = [&](std::span<const std::byte> b) {
      if (meter) meter->add(b.size());
      if (whole) whole->update(b);
      while (!b.empty()) {
        if (!d) d.emplace(opt_.algo);
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(b.size(), kChunk - in_chunk));
        d->update(b.first(n));
        b = b.subspan(n);
        if ((in_chunk += n) == kChunk) {
          if (c == l.chunk_digests.size()) throw Error(rules::kInternal, "a streamed storage gave too many bytes");
          l.chunk_digests[c++] = d->finish();
          d.reset();
          in_chunk = 0;
        }
      }
    };
    if (l.storage)
      l.storage->stream(0, l.nbytes, feed);
    else
      l.tensor->for_each_run(feed);
    if (d && c < l.chunk_digests.size()) l.chunk_digests[c++] = d->finish();
    if (c != l.chunk_digests.size())
      throw Error(rules::kInternal,
                  fmt::format("a streamed storage gave {} chunks instead of {}", c, l.chunk_digests.size()));
    if (whole) {
      const std::string hex = detail::util::to_hex(whole->finish());
      const std::lock_guard lock(streamed_mutex_);
      (*streamed_sha256_)[l.tensor] = hex;
    }
  }

  // Cuts the covered bytes of every checksum of checks_ into pieces (see the top of the file): the jobs whose
  // bytes lie inside it become fused pieces (fused[job] = piece), the rest of its
  // bytes CRC-only pieces (listed in crc_only). Pieces of one record are consecutive
  // in `pieces` and in file order, and together cover the record exactly once.
  void tile_records(const std::vector<Job>& jobs, std::vector<CrcPiece>& pieces, std::vector<std::size_t>& fused,
                    std::vector<std::size_t>& crc_only) const {
    const auto& checks = checks_;
    auto addr = [](const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p); };
    // Checksums by start address (covered ranges never overlap: each is one container
    // record, and the reader checks the records are disjoint).
    std::vector<std::size_t> order(checks.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return addr(checks[a]->covered.data()) < addr(checks[b]->covered.data());
    });
    // Jobs inside each record.
    std::vector<std::vector<std::size_t>> inside(checks.size());
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const auto& b = jobs[j].bytes;
      if (b.empty()) continue;
      const std::uintptr_t lo = addr(b.data()), hi = lo + b.size();
      auto it = std::upper_bound(order.begin(), order.end(), lo,
                                 [&](std::uintptr_t v, std::size_t c) { return v < addr(checks[c]->covered.data()); });
      if (it == order.begin()) continue;
      const auto& rec = checks[*std::prev(it)]->covered;
      if (hi <= addr(rec.data()) + rec.size()) inside[*std::prev(it)].push_back(j);
    }
    auto add_gap = [&](std::size_t c, const std::byte* from, const std::byte* to) {
      while (from < to) {
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, static_cast<std::uint64_t>(to - from)));
        crc_only.push_back(pieces.size());
        pieces.push_back({c, {from, n}});
        from += n;
      }
    };
    for (std::size_t c = 0; c < checks.size(); ++c) {
      auto& js = inside[c];
      std::sort(js.begin(), js.end(),
                [&](std::size_t a, std::size_t b) { return addr(jobs[a].bytes.data()) < addr(jobs[b].bytes.data()); });
      const std::byte* cursor = checks[c]->covered.data();
      for (std::size_t j : js) {
        const std::byte* start = jobs[j].bytes.data();
        if (addr(start) < addr(cursor)) continue;  // overlaps a piece already taken: hashed only
        add_gap(c, cursor, start);
        fused[j] = pieces.size();
        pieces.push_back({c, jobs[j].bytes});
        cursor = start + jobs[j].bytes.size();
      }
      add_gap(c, cursor, checks[c]->covered.data() + checks[c]->covered.size());
    }
  }

  static void put_u64(std::string& out, std::uint64_t v) { detail::util::append_le<std::uint64_t>(out, v); }
  static void put_str(std::string& out, char tag, std::string_view s) {
    out += tag;
    put_u64(out, s.size());
    out += s;
  }
  static void put_dtype(std::string& out, DType d) {
    auto n = name(d);
    out += static_cast<char>(n.size());
    out += n;
  }

  // Minimal two's complement, little-endian (pickle's LONG1 rule); 0 is empty.
  static void put_int(std::string& out, std::int64_t v) {
    std::string b;
    if (v != 0) {
      detail::util::append_le<std::int64_t>(b, v);
      while (b.size() > 1) {
        const auto top = static_cast<unsigned char>(b.back());
        const bool below_neg = static_cast<unsigned char>(b[b.size() - 2]) & 0x80;
        if ((top == 0x00 && !below_neg) || (top == 0xff && below_neg))
          b.pop_back();
        else
          break;
      }
    }
    out += 'I';
    detail::util::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(b.size()));
    out += b;
  }

  void encode_items(const std::vector<std::pair<Value, Value>>& items, std::string& out, bool sorted) {
    put_u64(out, items.size());
    if (!sorted) {
      for (const auto& [k, v] : items) {
        encode(k, out);
        encode(v, out);
        flush(out);
      }
      return;
    }
    // Only the keys' encodings are kept (to sort by); each value is encoded straight
    // into `out`, in key order (a dict of 200,000 tensors: no second copy of it).
    std::vector<std::string> keys(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) encode(items[i].first, keys[i]);
    std::vector<std::uint32_t> order(items.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
    for (std::uint32_t i : order) {
      out += keys[i];
      std::string().swap(keys[i]);
      encode(items[i].second, out);
      flush(out);
    }
  }

  // The encoding of the root goes into a digest as it grows (streamed_, set by
  // digest_of): bytes appended to the root's buffer are final, so they are hashed and
  // dropped a MiB at a time instead of being held whole.
  void flush(std::string& out) {
    if (streamed_ == nullptr || &out != streamed_buf_ || out.size() < (std::size_t{1} << 20)) return;
    streamed_->update(out);
    out.clear();
  }

  // Recursive graphs (has_refs_): containers on the current path are kept in path_,
  // and a container met again on it is 'P' u64(distance up the path).
  void encode(const Value& v0, std::string& out) {
    using K = Value::Kind;
    if (!has_refs_) return encode_node(v0, out);
    const bool ref = v0.is(K::kRef);
    const Value v = ref ? v0.ref_target() : v0;
    if (ref && v.is_none()) throw Error(rules::kInternal, "a recursive reference outlives its target");
    const bool container = v.is(K::kList) || v.is(K::kTuple) || v.is(K::kDict) || v.is(K::kSet) || v.is(K::kObject);
    if (!container) return encode_node(v, out);
    if (auto it = on_path_.find(v.node()); it != on_path_.end()) {
      out += 'P';
      put_u64(out, path_len_ - 1 - it->second);
      return;
    }
    if (ref) ++ref_depth_;
    if (ref_depth_ > 0 && ++expanded_ > detail::hash::kMaxRefExpansion)
      throw Error(detail::hash::kRecursionExpansion,
                  "the recursive value graph expands to more than 2^24 containers below its back-references");
    on_path_.emplace(v.node(), path_len_++);
    encode_node(v, out);
    --path_len_;
    on_path_.erase(v.node());
    if (ref) --ref_depth_;
  }

  void encode_node(const Value& v, std::string& out) {
    using K = Value::Kind;
    switch (v.kind()) {
      case K::kNone:
        out += 'N';
        return;
      case K::kBool:
        out += 'B';
        out += static_cast<char>(v.as_bool() ? 1 : 0);
        return;
      case K::kInt:
        put_int(out, v.as_int());
        return;
      case K::kBigInt: {
        const auto& b = v.as_bigint().le_bytes;
        out += 'I';
        detail::util::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(b.size()));
        out += b;
        return;
      }
      case K::kFloat: {
        double d = v.as_float();
        std::uint64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        out += 'F';
        put_u64(out, bits);
        return;
      }
      case K::kComplex: {
        const Complex c = v.as_complex();
        std::uint64_t re, im;
        std::memcpy(&re, &c.real, sizeof re);
        std::memcpy(&im, &c.imag, sizeof im);
        out += 'C';
        put_u64(out, re);
        put_u64(out, im);
        return;
      }
      case K::kStr:
        put_str(out, 'S', v.as_str());
        return;
      case K::kBytes:
        put_str(out, 'Y', v.as_bytes());
        return;
      case K::kList:
      case K::kTuple: {
        out += v.kind() == K::kList ? 'L' : 'T';
        put_u64(out, v.items().size());
        for (const auto& x : v.items()) {
          encode(x, out);
          flush(out);
        }
        return;
      }
      case K::kDict:
        out += 'D';
        encode_items(v.as_dict().items, out, true);
        return;
      case K::kSet: {
        std::vector<std::string> enc;
        for (const auto& x : v.as_set().items) {
          std::string e;
          encode(x, e);
          enc.push_back(std::move(e));
        }
        std::sort(enc.begin(), enc.end());
        out += 'E';
        put_u64(out, enc.size());
        for (const auto& e : enc) out += e;
        return;
      }
      case K::kTensor: {
        const Tensor& t = *v.as_tensor();
        if (encoded_ != nullptr)
          if (const auto it = encoded_->find(&t); it != encoded_->end()) {
            out += it->second;
            return;
          }
        out += t.quantization ? 'Q' : 'X';
        put_dtype(out, t.dtype);
        detail::util::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(t.shape.size()));
        for (auto d : t.shape) detail::util::append_le<std::int64_t>(out, d);
        out += static_cast<char>((t.requires_grad ? 1 : 0) | (t.is_parameter ? 2 : 0) |
                                 (t.numpy == NumpyType::kArray ? 4 : 0) | (t.numpy == NumpyType::kScalar ? 8 : 0) |
                                 (t.attributes ? 16 : 0));
        if (t.attributes) encode(*t.attributes, out);
        if (const auto& q = t.quantization) {
          const Value scheme = Value::str(std::string(scheme_name(q->scheme)));
          encode(q->per_channel() ? Value::tuple({scheme, Value(q->scales), Value(q->zero_points), Value(q->axis)})
                                  : Value::tuple({scheme, Value(q->scale), Value(q->zero_point)}),
                 out);
        }
        out += leaves_[index_.at(&t)].digest;
        return;
      }
      case K::kStorage: {
        const Storage& s = *v.as_storage();
        out += 'R';
        put_dtype(out, s.dtype);
        out += leaves_[index_.at(&s)].digest;
        return;
      }
      case K::kGlobal:
        out += 'G';
        put_str(out, 'S', v.as_global().module);
        put_str(out, 'S', v.as_global().name);
        return;
      case K::kObject: {
        const Object& o = v.as_object();
        out += 'O';
        out += static_cast<char>(o.how);
        for (const auto* p : {&o.callable, &o.args, &o.kwargs, &o.state}) {
          if (*p)
            encode(**p, out);
          else
            out += 'N';
        }
        out += 'L';
        put_u64(out, o.list_items.size());
        for (const auto& x : o.list_items) encode(x, out);
        out += 'D';
        encode_items(o.dict_items, out, false);
        return;
      }
      case K::kRef:
        throw Error(rules::kInternal, "a recursive reference the hash plan did not see");
    }
  }

  std::string digest_of(const Value& root) {
    Digest d(opt_.algo);
    d.update(kContentDomain);
    std::string enc;
    streamed_ = &d;
    streamed_buf_ = &enc;
    encode(root, enc);
    streamed_ = nullptr;
    streamed_buf_ = nullptr;
    d.update(enc);
    return detail::hash::digest_text(opt_.algo, d.finish());
  }

 public:
  static std::string digest_of_encoding(HashAlgo algo, std::string_view enc) {
    Digest d(algo);
    d.update(kContentDomain);
    d.update(enc);
    return detail::hash::digest_text(algo, d.finish());
  }

 private:
  HashOptions opt_;
  detail::util::ProgressMeter* meter_ = nullptr;
  std::vector<const Storage::PendingChecksum*> checks_;  // to verify while hashing, in leaf order
  std::vector<std::size_t> check_root_;                  // run_many: the tree of each of checks_
  std::vector<std::exception_ptr> failed_;               // per check: its error, or null
  std::unordered_set<const Storage::PendingChecksum*> pending_seen_;
  std::vector<Leaf> leaves_;
  std::unordered_map<const void*, std::size_t> index_;
  std::unordered_map<const Tensor*, std::string>* streamed_sha256_ = nullptr;
  std::mutex streamed_mutex_;                               // guards streamed_sha256_ (jobs run in parallel)
  Digest* streamed_ = nullptr;                              // digest_of: the root's encoding is hashed as it grows
  const std::string* streamed_buf_ = nullptr;               // ... from this buffer
  bool has_refs_ = false;                                   // plan() saw a Ref
  std::unordered_map<const void*, std::uint64_t> on_path_;  // container -> its depth on the path
  std::uint64_t path_len_ = 0, ref_depth_ = 0, expanded_ = 0;
  const std::unordered_map<const Tensor*, std::string>* encoded_ = nullptr;
  const std::unordered_map<const Tensor*, std::vector<std::string>>* known_ = nullptr;
  std::unordered_map<const Tensor*, std::vector<std::string>>* chunks_out_ = nullptr;
};

}  // namespace

std::string content_hash(const Value& root, const HashOptions& options) { return ContentHasher(options).run(root); }

namespace detail::hash {

std::vector<std::string> content_hash_many(const std::vector<const Value*>& roots, const HashOptions& options,
                                           std::vector<std::exception_ptr>& errors) {
  return ContentHasher(options).run_many(roots, errors);
}

std::string encode_value(const Value& v, const HashOptions& options) { return ContentHasher(options).encoding(v); }

std::string content_hash_encoded(const Value& root, const std::unordered_map<const Tensor*, std::string>& encoded,
                                 const HashOptions& options) {
  ContentHasher h(options);
  h.set_encoded(&encoded);
  return ContentHasher::digest_of_encoding(options.algo, h.encoding(root));
}

std::string content_hash_chunks(const Value& root, const HashOptions& options,
                                std::unordered_map<const Tensor*, std::vector<std::string>>& chunks) {
  ContentHasher h(options);
  h.set_chunks_out(&chunks);
  return h.run(root);
}

std::string content_hash_known(const Value& root,
                               const std::unordered_map<const Tensor*, std::vector<std::string>>& known,
                               const HashOptions& options) {
  ContentHasher h(options);
  h.set_known(&known);
  return ContentHasher::digest_of_encoding(options.algo, h.encoding(root));
}

std::string encode_plain_tensor(DType dtype, const std::vector<std::int64_t>& shape, std::string_view leaf) {
  std::string out(1, 'X');
  const auto n = name(dtype);
  out += static_cast<char>(n.size());
  out += n;
  util::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(shape.size()));
  for (auto d : shape) util::append_le<std::int64_t>(out, d);
  out += '\0';  // flags: a plain tensor
  out += leaf;
  return out;
}

std::string leaf_digest(HashAlgo algo, std::uint64_t nbytes, const std::vector<std::string>& chunk_digests) {
  Digest d(algo);
  d.update(kTensorDomain);
  std::string n;
  util::append_le<std::uint64_t>(n, nbytes);
  d.update(n);
  for (const auto& c : chunk_digests) d.update(c);
  return d.finish();
}

std::uint64_t content_hash_bytes(const Value& root) { return ContentHasher(HashOptions{}).planned_bytes(root); }

std::string content_hash(const Value& root, const HashOptions& options, util::ProgressMeter& meter) {
  return ContentHasher(options, &meter).run(root);
}

std::string content_hash(const Value& root, const HashOptions& options, util::ProgressMeter& meter,
                         std::unordered_map<const Tensor*, std::string>& streamed_sha256) {
  ContentHasher h(options, &meter);
  h.set_streamed_sha256_out(&streamed_sha256);
  return h.run(root);
}

std::vector<std::string> tensor_sha256_all(const std::vector<TensorRef>& tensors, unsigned threads,
                                           util::ProgressMeter& meter) {
  std::vector<std::string> out(tensors.size());
  util::parallel_for(tensors.size(), threads, [&](std::size_t i) {
    out[i] = tensor_sha256(*tensors[i].tensor);
    meter.add(tensors[i].tensor->nbytes());
  });
  return out;
}

}  // namespace detail::hash

std::string tensor_sha256(const Tensor& t) {
  detail::hash::Digest d(HashAlgo::kSha256);
  t.for_each_run([&](std::span<const std::byte> r) { d.update(r); });
  return detail::util::to_hex(d.finish());
}

std::vector<std::string> tensor_sha256_all(const std::vector<TensorRef>& tensors, unsigned threads) {
  std::vector<std::string> out(tensors.size());
  detail::util::parallel_for(tensors.size(), threads,
                             [&](std::size_t i) { out[i] = tensor_sha256(*tensors[i].tensor); });
  return out;
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  return detail::util::to_hex(detail::hash::Digest::oneshot(HashAlgo::kSha256, bytes));
}

}  // namespace tensorseal
