// pickle: constants and rules (spec: docs/formats/pickle.md).
//
//   stream = opcode* STOP      one opcode byte, then its inline argument (opcodes.h)
//
// Every rule the VM or the writer can break is listed here; each has a named test in
// tests/cpp/pickle_vm_test.cc or tests/cpp/pickle_writer_test.cc.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::pickle {

// Python's int(str) refuses more than 4300 digits (sys.int_info.default_max_str_digits);
// INT/LONG text arguments get the same cap.
inline constexpr std::size_t kMaxIntDigits = 4300;
// LONG1/LONG4 payload cap: 4096 bytes = 32768-bit integers, far beyond anything a
// checkpoint holds, small enough that rendering one in decimal stays cheap.
inline constexpr std::size_t kMaxLongBytes = 4096;
// Bytes charged against Limits::max_alloc: one element slot of a container
// (a Value), one container node, and the fixed part of a str/bytes value.
inline constexpr std::uint64_t kSlotCost = 16;
inline constexpr std::uint64_t kNodeCost = 64;
// CPython's pickler batches APPENDS/SETITEMS by 1000 (pickle.Pickler._BATCHSIZE).
inline constexpr std::size_t kBatchSize = 1000;
// The writer recurses over the value tree; deeper trees (which the VM never produces
// with the default Limits::max_depth of 1000) are refused.
inline constexpr std::uint32_t kMaxWriteDepth = 5000;
// The protocol the canonical writer emits (what torch.save uses).
inline constexpr int kWriterProtocol = 2;

namespace rules {
using K = ErrorKind;
// Framing of the byte stream.
inline constexpr Rule kTruncated{"pickle/truncated", K::kCorrupt};
inline constexpr Rule kUnknownOpcode{"pickle/unknown-opcode", K::kCorrupt};
inline constexpr Rule kUnsupportedProtocol{"pickle/unsupported-protocol", K::kUnsupported};
// Stack discipline.
inline constexpr Rule kStackUnderflow{"pickle/stack-underflow", K::kCorrupt};
inline constexpr Rule kMarkMissing{"pickle/mark-missing", K::kCorrupt};
inline constexpr Rule kMemoMissing{"pickle/memo-missing", K::kCorrupt};
inline constexpr Rule kBadMemoIndex{"pickle/bad-memo-index", K::kCorrupt};
// Arguments.
inline constexpr Rule kBadNumberText{"pickle/bad-number-text", K::kCorrupt};
inline constexpr Rule kBadStringLiteral{"pickle/bad-string-literal", K::kCorrupt};
inline constexpr Rule kBadUtf8{"pickle/bad-utf8", K::kCorrupt};
inline constexpr Rule kSurrogate{"pickle/surrogate", K::kUnsupported};
inline constexpr Rule kPy2StringEncoding{"pickle/py2-string-encoding", K::kUnsupported};
inline constexpr Rule kNegativeLength{"pickle/negative-length", K::kCorrupt};
inline constexpr Rule kLongTooLarge{"pickle/long-too-large", K::kLimit};
inline constexpr Rule kBadPersId{"pickle/bad-persid", K::kCorrupt};
// Operand types.
inline constexpr Rule kStackGlobalOperands{"pickle/stack-global-operands", K::kCorrupt};
inline constexpr Rule kArgsNotTuple{"pickle/args-not-tuple", K::kCorrupt};
inline constexpr Rule kKwargsNotDict{"pickle/kwargs-not-dict", K::kCorrupt};
inline constexpr Rule kBadAppendTarget{"pickle/bad-append-target", K::kCorrupt};
inline constexpr Rule kBadSetItemTarget{"pickle/bad-setitem-target", K::kCorrupt};
inline constexpr Rule kBadAddItemsTarget{"pickle/bad-additems-target", K::kCorrupt};
inline constexpr Rule kBadBuildTarget{"pickle/bad-build-target", K::kCorrupt};
inline constexpr Rule kBadBuildState{"pickle/bad-build-state", K::kCorrupt};
inline constexpr Rule kOddSetItems{"pickle/odd-setitems", K::kCorrupt};
inline constexpr Rule kUnhashableKey{"pickle/unhashable-key", K::kCorrupt};
inline constexpr Rule kObjMissingClass{"pickle/obj-missing-class", K::kCorrupt};
// Features tensorseal refuses.
inline constexpr Rule kPersistentId{"pickle/persistent-id", K::kUnsupported};
inline constexpr Rule kExtensionCode{"pickle/extension-code", K::kUnsupported};
inline constexpr Rule kOutOfBandBuffer{"pickle/out-of-band-buffer", K::kUnsupported};
inline constexpr Rule kLateMutation{"pickle/late-mutation", K::kUnsupported};
// Limits (include/tensorseal/limits.h), one rule each.
inline constexpr Rule kMaxBytes{"pickle/max-bytes", K::kLimit};
inline constexpr Rule kMaxOps{"pickle/max-ops", K::kLimit};
inline constexpr Rule kMaxDepth{"pickle/max-depth", K::kLimit};
inline constexpr Rule kMaxStack{"pickle/max-stack", K::kLimit};
inline constexpr Rule kMaxMemo{"pickle/max-memo", K::kLimit};
inline constexpr Rule kMaxString{"pickle/max-string", K::kLimit};
inline constexpr Rule kMaxAlloc{"pickle/max-alloc", K::kLimit};
// Writer-side rules.
inline constexpr Rule kWriteNoHook{"pickle/write-no-hook", K::kInvalidArgument};
inline constexpr Rule kWriteGlobalName{"pickle/write-global-name", K::kUnsupported};
inline constexpr Rule kWriteTooDeep{"pickle/write-too-deep", K::kLimit};
inline constexpr Rule kWriteTooLarge{"pickle/write-too-large", K::kUnsupported};
inline constexpr Rule kWriteBadValue{"pickle/write-bad-value", K::kInvalidArgument};
}  // namespace rules

// Facts about one pickle stream (Parsed::facts).
namespace topics {
using core::Topic;
inline constexpr Topic kProtocol{"pickle.protocol", "the pickle protocol version differs"};
inline constexpr Topic kMemo{"pickle.memo",
                             "the pickle memo is used differently (MEMOIZE/BINPUT numbering, repeated objects)"};
inline constexpr Topic kOpcodes{"pickle.opcodes", "the pickle uses different opcodes for the same values"};
inline constexpr Topic kFrames{"pickle.frames", "the pickle is cut into a different number of FRAMEs (protocol 4+)"};
inline constexpr Topic kStopLeftover{
    "pickle.stop-leftover",
    "the pickle leaves a different number of values or marks behind at STOP (CPython's pickler leaves none)"};
inline constexpr Topic kAll[] = {kProtocol, kMemo, kOpcodes, kFrames, kStopLeftover};
}  // namespace topics

}  // namespace tensorseal::detail::pickle
