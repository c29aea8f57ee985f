// tensorseal/progress.h — progress of long work (hash, canon, convert, verify,
// inspect, diff): a callback the library calls with (bytes done, bytes in all).
//
// Contract: calls are serialised (never concurrent, though they may come from worker
// threads); `done` never decreases and never exceeds `total`; `total` is fixed for one
// operation; the last call of an operation that succeeds has done == total. The
// library calls it at most about 512 times per operation (and for every 1/512 of the
// bytes at most once), so a slow callback (Python, a terminal) costs nothing
// measurable. An exception the callback throws stops the work and reaches the caller
// (e.g. KeyboardInterrupt from Python). Null: no progress.
#pragma once

#include <cstdint>
#include <functional>

#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

}  // namespace tensorseal
TENSORSEAL_API_END
