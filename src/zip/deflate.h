// tensorseal's own DEFLATE encoder (RFC 1951), for the members canon writes
// compressed (.npz from np.savez_compressed, docs/formats/npy.md "Compressed members").
//
// Why not zlib or libdeflate, which the project links: their output is a function of
// the library's version and build (zlib-ng, Chromium's zlib, libdeflate 1.x releases
// all emit different streams at the same level), so a canonical file could not have
// the same bytes on every machine. This encoder's output depends only on its input
// and the constants in deflate.cc; the golden digests in tests/cpp/deflate_test.cc pin
// it, and any change to them is a new canonical .npz version.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tensorseal::detail::zip {

// A raw DEFLATE stream (no zlib or gzip wrapper) of `in`, as a zip DEFLATED member
// holds it. Deterministic: the same input gives the same bytes everywhere.
[[nodiscard]] std::vector<std::byte> deflate(std::span<const std::byte> in);

}  // namespace tensorseal::detail::zip
