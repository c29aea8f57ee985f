// torch checkpoint formats: constants and rules (specs: docs/formats/torch-zip.md,
// docs/formats/torch-legacy.md, docs/formats/tar.md, docs/formats/canonical-pt.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::torch {

// ---- zip format -----------------------------------------------------------------
inline constexpr std::string_view kDataPkl = "data.pkl";
inline constexpr std::string_view kDataDir = "data/";
inline constexpr std::string_view kVersionRecord = "version";
inline constexpr std::string_view kDataVersionRecord = ".data/version";
inline constexpr std::string_view kByteOrderRecord = "byteorder";
inline constexpr std::string_view kFormatVersionRecord = ".format_version";
inline constexpr std::string_view kStorageAlignmentRecord = ".storage_alignment";
inline constexpr std::string_view kSerializationIdRecord = ".data/serialization_id";
// TorchScript archives carry these; they are programs, not checkpoints.
inline constexpr std::string_view kTorchScriptMarkers[] = {"constants.pkl", "code/"};
// torch.export.save archives (.pt2: models/, data/weights/, archive_format "pt2") carry
// this record; they are programs too.
inline constexpr std::string_view kExportMarker = "archive_format";
inline constexpr std::uint64_t kMinFileVersion = 1, kMaxFileVersion = 10;

// ---- legacy format --------------------------------------------------------------
// The pickled magic number and protocol version that open a legacy file.
inline constexpr std::string_view kLegacyMagic = "119547037146038801333356";  // 0x1950a86a20f9469cfc6c
inline constexpr std::int64_t kLegacyProtocolVersion = 1001;

// ---- tar format (torch.save before the legacy stream; torch.load's legacy_load) --
// The members torch.load reads, and the one it ignores (written by the same _save).
inline constexpr std::string_view kTarStorages = "storages", kTarTensors = "tensors", kTarPickle = "pickle",
                                  kTarSysInfo = "sys_info";
// A storage record is at least a pickle (2 bytes: an opcode and STOP) and its u64
// element count; a tensor record a pickle, i32 ndim, 4 bytes and the i64 offset.
inline constexpr std::uint64_t kTarMinStorageRecord = 2 + 8, kTarMinTensorRecord = 2 + 4 + 4 + 8;

namespace rules {
using K = ErrorKind;
inline constexpr Rule kNoDataPkl{"torch-zip/no-data-pkl", K::kCorrupt};
inline constexpr Rule kMixedPrefix{"torch-zip/entry-outside-prefix", K::kCorrupt};
inline constexpr Rule kTorchScript{"torch-zip/torchscript", K::kUnsupported};
inline constexpr Rule kExportProgram{"torch-zip/export-program", K::kUnsupported};
inline constexpr Rule kBadVersion{"torch-zip/bad-version", K::kCorrupt};
inline constexpr Rule kBadByteOrder{"torch-zip/bad-byteorder", K::kCorrupt};
inline constexpr Rule kMissingStorage{"torch-zip/missing-storage-record", K::kCorrupt};
inline constexpr Rule kStorageTooSmall{"torch/storage-too-small", K::kCorrupt};
inline constexpr Rule kBadPersistentId{"torch/bad-persistent-id", K::kCorrupt};
inline constexpr Rule kBadRebuildArgs{"torch/bad-rebuild-args", K::kCorrupt};
inline constexpr Rule kUnknownStorageType{"torch/unknown-storage-type", K::kCorrupt};
inline constexpr Rule kUnsupportedRebuild{"torch/unsupported-rebuild", K::kUnsupported};
inline constexpr Rule kNestingTooDeep{"torch/nested-files-too-deep", K::kLimit};
inline constexpr Rule kLegacyMagic{"torch-legacy/bad-magic", K::kCorrupt};
inline constexpr Rule kLegacyProtocol{"torch-legacy/bad-protocol", K::kCorrupt};
inline constexpr Rule kLegacySysInfo{"torch-legacy/bad-sys-info", K::kCorrupt};
inline constexpr Rule kLegacyKeys{"torch-legacy/bad-key-list", K::kCorrupt};
inline constexpr Rule kLegacyStorageHeader{"torch-legacy/bad-storage-record", K::kCorrupt};
inline constexpr Rule kLegacyTrailing{"torch-legacy/trailing-data", K::kCorrupt};
inline constexpr Rule kPickleTrailing{"pickle-file/trailing-data", K::kCorrupt};
inline constexpr Rule kTarMissingMember{"torch-tar/missing-member", K::kCorrupt};
inline constexpr Rule kTarBadCount{"torch-tar/bad-count", K::kCorrupt};
inline constexpr Rule kTarBadStorage{"torch-tar/bad-storage", K::kCorrupt};
inline constexpr Rule kTarBadView{"torch-tar/bad-storage-view", K::kCorrupt};
inline constexpr Rule kTarBadTensor{"torch-tar/bad-tensor", K::kCorrupt};
inline constexpr Rule kTarDuplicateKey{"torch-tar/duplicate-key", K::kCorrupt};
inline constexpr Rule kTarBadPersistentId{"torch-tar/bad-persistent-id", K::kCorrupt};
inline constexpr Rule kTarTrailing{"torch-tar/trailing-data", K::kCorrupt};
inline constexpr Rule kTarBadSysInfo{"torch-tar/bad-sys-info", K::kCorrupt};
inline constexpr Rule kTarBigEndian{"torch-tar/big-endian", K::kUnsupported};
// Writer-side.
inline constexpr Rule kCannotWrite{"torch-writer/cannot-write", K::kUnsupported};
}  // namespace rules

// Facts the torch readers add to those of the pickle VM and the zip archive.
namespace topics {
using detail::core::Topic;
inline constexpr Topic kFileVersion{"torch.file_version",
                                    "the torch archive's format version record (version, .data/version) differs"};
inline constexpr Topic kRecord{"torch.record",
                               "a torch archive metadata record (.format_version, .storage_alignment) differs"};
inline constexpr Topic kSerializationId{
    "zip.serialization_id",
    "torch's .data/serialization_id differs; it hashes record names in hash-set order, which varies between "
    "platforms and builds"};
inline constexpr Topic kByteorder{"torch.byteorder", "the files record a different byte order"};
inline constexpr Topic kSysInfo{"torch.sys_info",
                                "the legacy torch header records different system info (type sizes, endianness)"};
inline constexpr Topic kStorageKey{
    "storage.key",
    "a storage's key differs; legacy torch files and pickles name storages by their memory address, which "
    "changes on every run"};
inline constexpr Topic kStorageSlack{
    "storage.slack",
    "a view was saved together with its whole storage: bytes outside the tensor's view are stored too"};
inline constexpr Topic kNestedFile{
    "pickle.nested_file", "a pickle embeds a whole torch file (torch.storage._load_from_bytes) of a different size"};
inline constexpr Topic kCrcNotRecorded{
    "zip.crc_not_recorded",
    "one archive records no CRC-32 checksums (torch.serialization.set_crc32_options(False)): its records cannot "
    "be checked for corruption"};
inline constexpr Topic kCrcSkipped{
    "zip.crc_skipped",
    "some storage records carry no CRC-32 (written by torch.save under torch.serialization.skip_data, their bytes "
    "filled in later): those records cannot be checked for corruption"};
inline constexpr Topic kUnexpectedRecords{
    "torch.unexpected_records",
    "the archive holds records torch's loader never reads (another loader, e.g. numpy.load or a script, might)"};
inline constexpr Topic kAll[] = {kFileVersion,    kRecord,     kSerializationId,  kByteorder,
                                 kSysInfo,        kStorageKey, kStorageSlack,     kNestedFile,
                                 kCrcNotRecorded, kCrcSkipped, kUnexpectedRecords};
}  // namespace topics

}  // namespace tensorseal::detail::torch
