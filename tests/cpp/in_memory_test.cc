// ReadOptions::in_memory: the file's bytes are copied into memory the result owns, the
// values equal the mapped read's (content hash), storages stay shared as in the file,
// nothing keeps the file mapped, and the file can then be truncated while the values
// are read (a mapped read would fault there). Fixtures: real torch.save / safetensors /
// numpy files (tests/fixtures/gen_*.py).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tensorseal/tensorseal.h"
#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files() {
  std::vector<fs::path> out;
  for (const char* gen : {"gen_torch", "gen_torch/hostile", "gen_safetensors", "gen_numpy"})
    for (const auto& e : fs::directory_iterator(testing::fixture_dir(gen)))
      if (e.is_regular_file() && e.path().extension() != ".json" && e.path().filename() != "torchscript.pt")
        out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(InMemory, ValuesEqualTheMappedReadAndNothingIsMapped) {
  ReadOptions in_memory;
  in_memory.in_memory = true;
  int read = 0;
  for (const fs::path& f : files()) {
    Checkpoint mapped;
    try {
      mapped = read_file(f);
    } catch (const Error&) {
      continue;  // hostile or unsupported fixtures: the same error either way (below)
    }
    const Checkpoint copied = read_file(f, in_memory);
    EXPECT_EQ(content_hash(copied.root), content_hash(mapped.root)) << f;
    EXPECT_EQ(copied.mapping, nullptr) << f;
    std::set<const Storage*> m, c;
    for (const auto& ref : collect_tensors(mapped.root)) m.insert(ref.tensor->storage.get());
    for (const auto& ref : collect_tensors(copied.root)) {
      EXPECT_FALSE(ref.tensor->storage->is_mapped()) << f << " " << ref.path;
      c.insert(ref.tensor->storage.get());
    }
    EXPECT_EQ(c.size(), m.size()) << f;  // shared storages stay shared
    ++read;
  }
  EXPECT_GT(read, 20);
}

TEST(InMemory, TheFileMayBeTruncatedWhileTheValuesLive) {
  const fs::path dir = fs::temp_directory_path() / ("tseal_in_memory_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path f = dir / "views.pt";
  fs::copy_file(testing::fixture_dir("gen_torch") / "views.pt", f, fs::copy_options::overwrite_existing);
  ReadOptions o;
  o.in_memory = true;
  const Checkpoint c = read_file(f, o);
  const std::string want = content_hash(read_file(testing::fixture_dir("gen_torch") / "views.pt").root);
  ASSERT_EQ(::truncate(f.c_str(), 0), 0);
  EXPECT_EQ(content_hash(c.root), want);  // reads every byte: no SIGBUS, same values
  fs::remove_all(dir);
}

TEST(InMemory, ErrorsAreTheMappedReadsErrors) {
  ReadOptions in_memory;
  in_memory.in_memory = true;
  int failed = 0;
  for (const fs::path& f : files()) {
    std::string a, b;
    try {
      (void)read_file(f);
    } catch (const Error& e) {
      a = e.what();
    }
    try {
      (void)read_file(f, in_memory);
    } catch (const Error& e) {
      b = e.what();
    }
    EXPECT_EQ(b, a) << f;
    failed += !a.empty();
  }
  // Some fixtures must fail for the comparison to mean anything (recursive pickles and
  // object arrays, which once failed too, are read now).
  EXPECT_GE(failed, 3);
}

}  // namespace
}  // namespace tensorseal
