// Per-format writers (src/<format>/). Each streams canonical bytes into a Sink.
#pragma once

#include "io/sink.h"
#include "tensorseal/value.h"
#include "tensorseal/write.h"

namespace tensorseal::detail {

void write_safetensors(const Value& root, const WriteOptions& options, Sink& sink);
void write_torch_zip(const Value& root, const WriteOptions& options, Sink& sink);
void write_torch_legacy(const Value& root, const WriteOptions& options, Sink& sink);
void write_npz(const Value& root, const WriteOptions& options, Sink& sink);
void write_npy(const Value& root, const WriteOptions& options, Sink& sink);

}  // namespace tensorseal::detail
