// A file's bytes copied into memory the result owns (ReadOptions::in_memory).
#pragma once

#include <memory>

#include "tensorseal/storage.h"

namespace tensorseal::detail::io {

// The bytes of `file` in anonymous memory owned by the returned storage: nothing
// refers to the file afterwards, so it may be rewritten, truncated or deleted while
// the storage lives (a mapping would fault, SIGBUS, on pages past a new end). The copy
// runs on all cores in pieces of 8 MiB; transparent huge pages are requested for the
// buffer (one fault per 2 MiB instead of per 4 KiB where the kernel allows it).
[[nodiscard]] std::shared_ptr<Storage> copy_into_memory(const MappedFile& file);

}  // namespace tensorseal::detail::io
