// tensorseal's DEFLATE encoder (deflate.h). What it writes (RFC 1951):
//
//   stream = block+                      the last one with BFINAL = 1
//   block  = the next kBlockInput input bytes (fewer for the last; an empty input is one
//            block), as whichever form takes the fewest bits, ties to the earlier:
//              dynamic Huffman (BTYPE 2), fixed Huffman (BTYPE 1),
//              stored (BTYPE 0, in pieces of at most 65535 bytes)
//   tokens = LZ77 over a 32 KiB window: hash chains of 3-byte prefixes (kHashBits),
//            at most kMaxChain candidates, the longest match (the nearest among equals),
//            one step of lazy evaluation below kLazyBelow; matches never cross a block
//   codes  = Huffman code lengths by the two-queue method over symbols sorted by
//            (frequency, symbol); over the limit (15 bits, 7 for the code-length code),
//            every non-zero frequency is halved (rounded up) and the code rebuilt.
//            Every code has at least two symbols (the lowest unused ones get 1).
//
// Every choice depends on the input only: no time, no threads, no library version.
#include "zip/deflate.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace tensorseal::detail::zip {
namespace {

using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

constexpr std::size_t kBlockInput = std::size_t{1} << 17;  // input bytes per block
constexpr int kHashBits = 15;
constexpr std::size_t kWindow = 32768;
// zlib's MAX_DIST (window - MIN_LOOKAHEAD 262): a chain entry this close is never stale.
constexpr std::size_t kMaxDistance = kWindow - 262;
constexpr int kMaxChain = 128;
constexpr int kLazyBelow = 32;
constexpr int kMinMatch = 3;
constexpr int kMaxMatch = 258;
constexpr int kMaxBits = 15;
constexpr int kMaxCodeLengthBits = 7;
constexpr std::size_t kMaxStored = 65535;
constexpr int kEndOfBlock = 256;
constexpr int kLitLenSymbols = 286;
constexpr int kDistSymbols = 30;

// RFC 1951 3.2.5: length codes 257..285 and distance codes 0..29.
constexpr std::array<u16, 29> kLengthBase = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                             31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<u8, 29> kLengthExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                             2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::array<u16, 30> kDistBase = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                           33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                           1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<u8, 30> kDistExtra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                           6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
// RFC 1951 3.2.7: the order code-length code lengths are sent in.
constexpr std::array<u8, 19> kCodeLengthOrder = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

int length_index(int len) {
  int i = static_cast<int>(kLengthBase.size()) - 1;
  while (kLengthBase[i] > len) --i;
  return i;
}

int dist_index(u32 dist) {
  int i = static_cast<int>(kDistBase.size()) - 1;
  while (kDistBase[i] > dist) --i;
  return i;
}

struct Token {
  u16 value;  // a literal byte, or a match length
  u16 dist;   // 0 for a literal
};

class BitWriter {
 public:
  explicit BitWriter(std::vector<std::byte>& out) : out_(out) {}
  // The low `bits` bits of `v`, least significant first (bits <= 16).
  void put(u32 v, int bits) {
    acc_ |= static_cast<u64>(v) << count_;
    count_ += bits;
    while (count_ >= 8) {
      out_.push_back(static_cast<std::byte>(acc_ & 0xFF));
      acc_ >>= 8;
      count_ -= 8;
    }
  }
  // A Huffman code, sent most significant bit first.
  void code(u32 c, int len) {
    u32 r = 0;
    for (int i = 0; i < len; ++i) r |= ((c >> i) & 1u) << (len - 1 - i);
    put(r, len);
  }
  void align() {
    if (count_ > 0) put(0, 8 - count_);
  }
  void raw(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }

 private:
  std::vector<std::byte>& out_;
  u64 acc_ = 0;
  int count_ = 0;
};

// Huffman code lengths for `freq` (two-queue method, leaves sorted by (freq, symbol)).
std::vector<u8> huffman_lengths(const std::vector<u32>& freq) {
  struct Node {
    u64 weight;
    int left, right;  // a leaf: left = -1, right = its symbol
  };
  std::vector<int> symbols;
  for (int s = 0; s < static_cast<int>(freq.size()); ++s)
    if (freq[s] > 0) symbols.push_back(s);
  std::stable_sort(symbols.begin(), symbols.end(), [&](int a, int b) { return freq[a] < freq[b]; });
  std::vector<Node> nodes;
  nodes.reserve(2 * symbols.size());
  for (int s : symbols) nodes.push_back({freq[s], -1, s});
  const std::size_t leaves = nodes.size();
  std::size_t next_leaf = 0, next_inner = leaves;
  auto pick = [&]() {
    if (next_leaf < leaves && (next_inner == nodes.size() || nodes[next_leaf].weight <= nodes[next_inner].weight))
      return static_cast<int>(next_leaf++);
    return static_cast<int>(next_inner++);
  };
  for (std::size_t k = 1; k < leaves; ++k) {
    const int a = pick();
    const int b = pick();
    nodes.push_back({nodes[a].weight + nodes[b].weight, a, b});
  }
  std::vector<int> depth(nodes.size(), 0);
  for (std::size_t j = nodes.size(); j-- > leaves;) {
    depth[nodes[j].left] = depth[j] + 1;
    depth[nodes[j].right] = depth[j] + 1;
  }
  std::vector<u8> len(freq.size(), 0);
  for (std::size_t i = 0; i < leaves; ++i) len[nodes[i].right] = static_cast<u8>(depth[i]);
  return len;
}

// Lengths of a complete code of at most `limit` bits covering every used symbol.
std::vector<u8> code_lengths(std::vector<u32> freq, int limit) {
  int used = 0;
  for (u32 f : freq) used += f > 0;
  for (std::size_t i = 0; used < 2 && i < freq.size(); ++i)
    if (freq[i] == 0) {
      freq[i] = 1;
      ++used;
    }
  while (true) {
    std::vector<u8> len = huffman_lengths(freq);
    if (*std::max_element(len.begin(), len.end()) <= limit) return len;
    for (u32& f : freq)
      if (f > 0) f = (f + 1) / 2;
  }
}

// Canonical codes for `len` (RFC 1951 3.2.2).
std::vector<u16> canonical_codes(const std::vector<u8>& len) {
  std::array<u16, kMaxBits + 2> count{}, next{};
  for (u8 l : len)
    if (l) ++count[l];
  u16 code = 0;
  for (int bits = 1; bits <= kMaxBits + 1; ++bits) {
    code = static_cast<u16>((code + count[bits - 1]) << 1);
    next[bits] = code;
  }
  std::vector<u16> out(len.size(), 0);
  for (std::size_t s = 0; s < len.size(); ++s)
    if (len[s]) out[s] = next[len[s]]++;
  return out;
}

struct Code {
  std::vector<u8> len;
  std::vector<u16> code;
};

Code make_code(std::vector<u8> len) {
  Code c;
  c.code = canonical_codes(len);
  c.len = std::move(len);
  return c;
}

// The code-length alphabet's symbols (with their extra bits) for the lengths `lens`.
struct ClSymbol {
  u8 symbol, extra;
};

std::vector<ClSymbol> run_length(const std::vector<u8>& lens) {
  std::vector<ClSymbol> out;
  std::size_t i = 0;
  while (i < lens.size()) {
    const u8 l = lens[i];
    std::size_t run = 1;
    while (i + run < lens.size() && lens[i + run] == l) ++run;
    i += run;
    if (l == 0) {
      while (run >= 11) {
        const std::size_t r = std::min<std::size_t>(run, 138);
        out.push_back({18, static_cast<u8>(r - 11)});
        run -= r;
      }
      if (run >= 3) {
        out.push_back({17, static_cast<u8>(run - 3)});
        run = 0;
      }
    } else {
      out.push_back({l, 0});
      --run;
      while (run >= 3) {
        const std::size_t r = std::min<std::size_t>(run, 6);
        out.push_back({16, static_cast<u8>(r - 3)});
        run -= r;
      }
    }
    for (; run > 0; --run) out.push_back({l, 0});
  }
  return out;
}

int cl_extra_bits(u8 symbol) { return symbol == 16 ? 2 : symbol == 17 ? 3 : symbol == 18 ? 7 : 0; }

// Finds LZ77 matches; positions are inserted into the hash chains in order.
class Matcher {
 public:
  explicit Matcher(std::span<const std::byte> in)
      : in_(in), head_(std::size_t{1} << kHashBits, -1), prev_(kWindow, -1) {}

  void insert_until(std::size_t q) {
    for (; inserted_ < q; ++inserted_) {
      if (inserted_ + 2 >= in_.size()) continue;
      const u32 h = hash(inserted_);
      prev_[inserted_ & (kWindow - 1)] = head_[h];
      head_[h] = static_cast<std::int64_t>(inserted_);
    }
  }

  // The longest match for position p of at most `room` bytes among the chain's
  // candidates (nearest first; a longer one replaces it): {length, distance}, length 0
  // when none reaches kMinMatch. Every position before p must be inserted.
  std::pair<int, u32> find(std::size_t p, std::size_t room) const {
    if (room < static_cast<std::size_t>(kMinMatch) || p + 2 >= in_.size()) return {0, 0};
    const std::size_t max_len = std::min<std::size_t>(room, kMaxMatch);
    const auto* b = reinterpret_cast<const u8*>(in_.data());
    std::int64_t c = head_[hash(p)];
    std::size_t best = 0;
    u32 best_dist = 0;
    for (int chain = 0; c >= 0 && chain < kMaxChain; ++chain) {
      const auto cand = static_cast<std::size_t>(c);
      const std::size_t d = p - cand;
      if (d > kMaxDistance) break;
      if (b[cand + best] == b[p + best]) {
        std::size_t n = 0;
        while (n < max_len && b[cand + n] == b[p + n]) ++n;
        if (n > best) {
          best = n;
          best_dist = static_cast<u32>(d);
          if (best >= max_len) break;
        }
      }
      const std::int64_t nx = prev_[cand & (kWindow - 1)];
      if (nx >= c) break;
      c = nx;
    }
    if (best < static_cast<std::size_t>(kMinMatch)) return {0, 0};
    return {static_cast<int>(best), best_dist};
  }

 private:
  u32 hash(std::size_t p) const {
    const auto* b = reinterpret_cast<const u8*>(in_.data()) + p;
    const u32 v = static_cast<u32>(b[0]) | (static_cast<u32>(b[1]) << 8) | (static_cast<u32>(b[2]) << 16);
    return (v * 2654435761u) >> (32 - kHashBits);
  }

  std::span<const std::byte> in_;
  std::vector<std::int64_t> head_, prev_;
  std::size_t inserted_ = 0;
};

Code fixed_litlen() {
  std::vector<u8> len(288);
  for (int s = 0; s < 288; ++s) len[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
  return make_code(std::move(len));
}

Code fixed_dist() { return make_code(std::vector<u8>(30, 5)); }

void write_tokens(BitWriter& w, const std::vector<Token>& tokens, const Code& ll, const Code& d) {
  for (const Token& t : tokens) {
    if (t.dist == 0) {
      w.code(ll.code[t.value], ll.len[t.value]);
      continue;
    }
    const int li = length_index(t.value);
    w.code(ll.code[257 + li], ll.len[257 + li]);
    if (kLengthExtra[li]) w.put(t.value - kLengthBase[li], kLengthExtra[li]);
    const int di = dist_index(t.dist);
    w.code(d.code[di], d.len[di]);
    if (kDistExtra[di]) w.put(t.dist - kDistBase[di], kDistExtra[di]);
  }
  w.code(ll.code[kEndOfBlock], ll.len[kEndOfBlock]);
}

void write_block(BitWriter& w, const std::vector<Token>& tokens, std::span<const std::byte> raw, bool final) {
  std::vector<u32> fll(kLitLenSymbols, 0), fd(kDistSymbols, 0);
  u64 extra = 0;
  fll[kEndOfBlock] = 1;
  for (const Token& t : tokens) {
    if (t.dist == 0) {
      ++fll[t.value];
      continue;
    }
    const int li = length_index(t.value), di = dist_index(t.dist);
    ++fll[257 + li];
    ++fd[di];
    extra += kLengthExtra[li] + kDistExtra[di];
  }
  auto data_bits = [&](const Code& ll, const Code& d) {
    u64 bits = extra;
    for (int s = 0; s < kLitLenSymbols; ++s) bits += u64{fll[s]} * ll.len[s];
    for (int s = 0; s < kDistSymbols; ++s) bits += u64{fd[s]} * d.len[s];
    return bits;
  };

  // Dynamic: the two codes, their lengths run-length coded with a third code.
  const Code ll = make_code(code_lengths(fll, kMaxBits));
  const Code dc = make_code(code_lengths(fd, kMaxBits));
  int hlit = kLitLenSymbols, hdist = kDistSymbols;
  while (hlit > 257 && ll.len[hlit - 1] == 0) --hlit;
  while (hdist > 1 && dc.len[hdist - 1] == 0) --hdist;
  std::vector<u8> lens(ll.len.begin(), ll.len.begin() + hlit);
  lens.insert(lens.end(), dc.len.begin(), dc.len.begin() + hdist);
  const std::vector<ClSymbol> cl_symbols = run_length(lens);
  std::vector<u32> fcl(19, 0);
  for (const ClSymbol& s : cl_symbols) ++fcl[s.symbol];
  const Code cl = make_code(code_lengths(fcl, kMaxCodeLengthBits));
  int hclen = 19;
  while (hclen > 4 && cl.len[kCodeLengthOrder[hclen - 1]] == 0) --hclen;
  u64 dynamic_bits = 3 + 5 + 5 + 4 + 3 * static_cast<u64>(hclen) + data_bits(ll, dc);
  for (const ClSymbol& s : cl_symbols) dynamic_bits += cl.len[s.symbol] + cl_extra_bits(s.symbol);

  static const Code kFixedLl = fixed_litlen();
  static const Code kFixedD = fixed_dist();
  const u64 fixed_bits = 3 + data_bits(kFixedLl, kFixedD);
  const u64 pieces = std::max<u64>(1, (raw.size() + kMaxStored - 1) / kMaxStored);
  const u64 stored_bits = pieces * (3 + 7 + 32) + 8 * static_cast<u64>(raw.size());

  if (dynamic_bits <= fixed_bits && dynamic_bits <= stored_bits) {
    w.put((final ? 1u : 0u) | (2u << 1), 3);
    w.put(static_cast<u32>(hlit - 257), 5);
    w.put(static_cast<u32>(hdist - 1), 5);
    w.put(static_cast<u32>(hclen - 4), 4);
    for (int i = 0; i < hclen; ++i) w.put(cl.len[kCodeLengthOrder[i]], 3);
    for (const ClSymbol& s : cl_symbols) {
      w.code(cl.code[s.symbol], cl.len[s.symbol]);
      if (const int e = cl_extra_bits(s.symbol)) w.put(s.extra, e);
    }
    write_tokens(w, tokens, ll, dc);
  } else if (fixed_bits <= stored_bits) {
    w.put((final ? 1u : 0u) | (1u << 1), 3);
    write_tokens(w, tokens, kFixedLl, kFixedD);
  } else {
    std::size_t pos = 0;
    for (u64 k = 0; k < pieces; ++k) {
      const std::size_t n = std::min(kMaxStored, raw.size() - pos);
      w.put(final && k + 1 == pieces ? 1u : 0u, 3);
      w.align();
      w.put(static_cast<u32>(n), 16);
      w.put(static_cast<u32>(~n & 0xFFFF), 16);
      w.raw(raw.subspan(pos, n));
      pos += n;
    }
  }
}

}  // namespace

std::vector<std::byte> deflate(std::span<const std::byte> in) {
  std::vector<std::byte> out;
  out.reserve(in.size() / 4 + 64);
  BitWriter w(out);
  Matcher m(in);
  const auto* b = reinterpret_cast<const u8*>(in.data());
  std::vector<Token> tokens;
  for (std::size_t start = 0;;) {
    const std::size_t end = std::min(in.size(), start + kBlockInput);
    tokens.clear();
    std::size_t p = start;
    while (p < end) {
      m.insert_until(p);
      auto [len, dist] = m.find(p, end - p);
      if (len >= kMinMatch && len < kLazyBelow && p + 1 < end) {
        m.insert_until(p + 1);
        if (m.find(p + 1, end - p - 1).first > len) {
          tokens.push_back({b[p], 0});
          ++p;
          continue;
        }
      }
      if (len >= kMinMatch) {
        tokens.push_back({static_cast<u16>(len), static_cast<u16>(dist)});
        p += static_cast<std::size_t>(len);
      } else {
        tokens.push_back({b[p], 0});
        ++p;
      }
    }
    const bool final = end == in.size();
    write_block(w, tokens, in.subspan(start, end - start), final);
    if (final) break;
    start = end;
  }
  w.align();
  return out;
}

}  // namespace tensorseal::detail::zip
