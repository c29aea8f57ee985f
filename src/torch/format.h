// The torch formats' entry points, one row each in the format table (src/api/formats.cc):
// torch zip (torch.save), torch legacy (_use_new_zipfile_serialization=False), torch
// tar (torch.save of torch 0.1) and plain pickle streams (pickle.dumps of tensors,
// storages, modules).
#pragma once

#include <cstddef>
#include <span>

#include "io/input.h"
#include "io/sink.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::torch {

// Recognisers: look at the first bytes only, never throw.
bool detect_torch_zip(std::span<const std::byte> head) noexcept;
bool detect_torch_legacy(std::span<const std::byte> head) noexcept;
bool detect_torch_tar(std::span<const std::byte> head) noexcept;
bool detect_pickle(std::span<const std::byte> head) noexcept;

// Readers: fill a Checkpoint or throw Error with the file name and byte offset set.
Checkpoint read_torch_zip(const io::Input& in);
Checkpoint read_torch_legacy(const io::Input& in);
Checkpoint read_torch_tar(const io::Input& in);
Checkpoint read_pickle_file(const io::Input& in);

// Writers: stream canonical bytes into `sink`.
void write_torch_zip(const Value& root, const WriteOptions& options, io::Sink& sink);
void write_torch_legacy(const Value& root, const WriteOptions& options, io::Sink& sink);
// The canonical pickle of a numpy object array's value (what np.save writes after the
// header with allow_pickle): numpy objects inline, no persistent ids. A torch tensor
// inside is torch/cannot-write (np.load could not read it).
std::string pickle_without_storages(const Value& root);

}  // namespace tensorseal::detail::torch
