// Replays every input a fuzz target once failed on (fuzz/regressions/<target>/*) through
// that target's logic (fuzz/fuzz_util.h), and every real-file seed of the reader
// targets (fuzz/corpus/<target>/*), in the normal test build: a regression comes back
// as a failed test here, and as a sanitizer report in build-asan/ (scripts/sanitize.sh).
//
// Regressions (what broke; where it was fixed):
//   nested_pickle/dotted-global-name-roundtrip: a global whose name has dots
//     (GLOBAL 'm a.b', or protocol 4's STACK_GLOBAL of a nested qualname) is written by
//     the canonical protocol-2 writer as getattr(m.a, 'b'), which the torch resolver
//     read back as an opaque getattr object: canon changed the content hash.
//     Fixed in src/torch/rebuild.cc (fold builtins.getattr(<global>, '<attr>')).
//   nested_pickle/dotted-global-name-trailing-dot: the same with a name ending in '.'
//     (written as getattr(m.a, '')): the fold is the exact inverse of the writer's split.
//   read_bytes/dotted-global-name-roundtrip, torch_legacy/dotted-global-name-roundtrip:
//     the same bug reached through a plain pickle and a legacy file.
//   read_bytes/tensor-where-collect-tensors-does-not-look: a tensor reachable only
//     through a place collect_tensors does not walk (a dict key, dict attributes, a
//     callable); the canonical .pt writer met it without a planned view: map::at threw
//     std::out_of_range ("[internal]" in the CLI). Fixed in src/torch/plan.cc (the
//     planner also walks everything the writer walks).
//   torch_legacy/roundtrip-2: a round-trip mismatch from the second long run (fixed by
//     the getattr fold changes above).
//   safetensors_header/json-number-overflow: a header number beyond double range
//     (5.9e534) made nlohmann_json throw out_of_range, which escaped read_safetensors
//     as a non-tensorseal exception (std::terminate in the fuzzer, "[internal]" in the
//     CLI). Fixed in src/safetensors/reader.cc (any json::exception -> header-json).
//   safetensors/nested-frozenset-key-hashing-time: a 1.7 KB pickle of frozensets built
//     from DUPs: hashing their items as set keys is charged to max_alloc, and with the
//     default 8 GiB it runs 0.6 s (5 s under ASan) before pickle/max-alloc; on a starved
//     core that passed libFuzzer's 25 s timeout. Not a hang: the safetensors target now
//     uses the small limits of every other reader target.
//   torch_legacy/frozenset-key-hashing-slow: the same shape inside a legacy file; 0.48 s
//     of CPU under ASan with the small limits, 25 s of wall time on a starved core (the
//     fifth long run's only other timeout). Bounded by max_alloc, not a hang.
//   tar/expanded-view-oom: a torch 0.1 tensor record with a stride of 0 describing
//     ~176 TB over a few bytes of storage; content_hash sized its chunk table from the
//     described bytes (a 5.6 GB allocation, the CI fuzz run's out-of-memory) and would
//     have walked every element. Fixed by Limits::max_expanded_bytes
//     (src/core/expansion.cc, checked by every reader that makes views).
//   tar/empty-view-stride-overflow: a tensor without elements (a 0 in its shape) whose
//     other dimension has a stride of 6e18: validate accepts it (torch does too), and
//     the .pt planner's density check multiplied stride by size in int64 (UBSan:
//     signed overflow, CI's next fuzz run). Fixed in src/torch/plan.cc (checked
//     multiply); the same class in Tensor::contiguous_strides and emit.cc's stride
//     tuple (util::stride_span), refused at read in safetensors headers and DCP
//     .metadata.
#include <algorithm>
#include <filesystem>
#include <vector>

#include "../../fuzz/fuzz_util.h"
#include "pickle/stdlib.h"
#include "pickle/vm.h"
#include "pickle/writer.h"
#include "test_util.h"
#include "zip/reader.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using fuzz::Outcome;

const fs::path kFuzzDir = fs::path(TENSORSEAL_SOURCE_DIR) / "fuzz";

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The pickle and zip targets drive one codec directly (fuzz/pickle_fuzz.cc,
// fuzz/zip_fuzz.cc); the rest go through the checkpoint readers.
Outcome run(const std::string& target, std::span<const std::byte> data) {
  if (target == "pickle") {
    Limits limits = fuzz::small_options().limits;
    detail::pickle::Hooks hooks;
    hooks.reduce = [](const Object& o, std::uint64_t) { return detail::pickle::stdlib_reduce(o); };
    try {
      detail::pickle::Parsed p = detail::pickle::parse(data, "fuzz", 0, limits, hooks);
      detail::pickle::Writer w({});
      (void)w.finish(p.value);
    } catch (const Error&) {
      return Outcome::kRejected;
    }
    return Outcome::kAccepted;
  }
  if (target == "zip") {
    Limits limits = fuzz::small_options().limits;
    try {
      const auto archive = detail::zip::read(data, "fuzz.zip", limits);
      for (const auto& e : archive.entries) {
        std::vector<std::byte> scratch;
        detail::zip::verify_crc(e, detail::zip::entry_bytes(data, e, scratch, "fuzz.zip", limits), "fuzz.zip");
      }
    } catch (const Error&) {
      return Outcome::kRejected;
    }
    return Outcome::kAccepted;
  }
  return fuzz::run_reader_target(target, data);
}

TEST(FuzzRegressions, EveryRecordedInputStaysFixed) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(kFuzzDir / "regressions")) {
    if (!e.is_directory()) continue;
    const std::string target = e.path().filename().string();
    for (const auto& f : files_in(e.path())) {
      const std::string bytes = testing::read_all(f);
      EXPECT_NE(run(target, testing::bytes_of(bytes)), Outcome::kRoundTripMismatch) << f;
      ++n;
    }
  }
  EXPECT_GE(n, 1u) << "fuzz/regressions/ holds the recorded inputs";
}

// The nested-name fix, on the shape real producers write: protocol 4 names a nested
// class with one STACK_GLOBAL ('m', 'Outer.Inner'); protocol 2 with getattr(m.Outer,
// 'Inner'). Both are one value, and canonical re-writing keeps it.
TEST(FuzzRegressions, NestedGlobalNamesAreOneValue) {
  using namespace std::string_literals;  // the pickles contain NUL bytes
  auto su = [](std::string_view s) { return "\x8c"s + char(s.size()) + std::string(s); };
  // {'k': m.Outer.Inner} at protocol 4 and at protocol 2.
  const std::string p4 = "\x80\x04}"s + su("k") + su("m") + su("Outer.Inner") + "\x93s.";
  const std::string p2 =
      "\x80\x02}X\x01\x00\x00\x00k"s + "c__builtin__\ngetattr\ncm\nOuter\nX\x05\x00\x00\x00Inner\x86Rs."s;
  const Checkpoint a = read_bytes(testing::bytes_of(p4), "p4.pkl");
  const Checkpoint b = read_bytes(testing::bytes_of(p2), "p2.pkl");
  EXPECT_EQ(content_hash(a.root), content_hash(b.root));
  const std::string canon = write_bytes(a.root, Format::kTorchZip);
  EXPECT_EQ(content_hash(read_bytes(testing::bytes_of(canon), "c.pt").root), content_hash(a.root));
}

// Every seed of the reader targets is a real file: all of them must parse and round-trip.
TEST(FuzzRegressions, SeedsOfReaderTargetsParse) {
  std::size_t n = 0;
  for (const char* target : {"torch_zip", "torch_legacy", "nested_pickle", "read_bytes", "safetensors_header", "dcp"}) {
    for (const auto& f : files_in(kFuzzDir / "corpus" / target)) {
      if (f.extension() == ".py") continue;
      const std::string bytes = testing::read_all(f);
      EXPECT_EQ(run(target, testing::bytes_of(bytes)), Outcome::kAccepted) << target << ": " << f;
      ++n;
    }
  }
  EXPECT_GE(n, 50u);
  // safetensors_index fuzzes from the safetensors_header seeds: both header parsers agree on them.
  for (const auto& f : files_in(kFuzzDir / "corpus" / "safetensors_header")) {
    const std::string bytes = testing::read_all(f);
    EXPECT_EQ(run("safetensors_index", testing::bytes_of(bytes)), Outcome::kAccepted) << f;
  }
}

}  // namespace
}  // namespace tensorseal
