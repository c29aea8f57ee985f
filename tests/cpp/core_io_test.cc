// Storage (owned, mapped, slices) and the atomic file sink (src/io/atomic_file.cc).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "io/sink.h"
#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// Sink::write(string_view) is declared on the base class (derived classes override the
// span overload), so text goes through a base reference.
void put(detail::io::Sink& sink, std::string_view s) { sink.write(s); }

// ---- Storage ----------------------------------------------------------------------

TEST(CoreStorage, OwnedAndSlices) {
  auto s = Storage::owned({std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}}, DType::kInt16);
  EXPECT_EQ(s->size(), 4u);
  EXPECT_FALSE(s->is_mapped());
  EXPECT_EQ(s->dtype, DType::kInt16);
  auto sl = Storage::slice(s, 1, 2);
  EXPECT_EQ(sl->size(), 2u);
  EXPECT_EQ(sl->bytes()[0], std::byte{2});
  EXPECT_EQ(sl->bytes().data(), s->bytes().data() + 1);  // no copy
  EXPECT_EQ(sl->dtype, DType::kInt16);
  EXPECT_NO_THROW((void)Storage::slice(s, 4, 0));
  EXPECT_EQ(testing::rule_of([&] { (void)Storage::slice(s, 3, 2); }), rules::kTruncated.id);
  EXPECT_EQ(testing::rule_of([&] { (void)Storage::slice(s, 5, 0); }), rules::kTruncated.id);
  EXPECT_EQ(testing::rule_of([&] { (void)Storage::slice(s, 1, ~std::uint64_t{0}); }), rules::kTruncated.id);
  // The slice keeps its parent alive.
  std::weak_ptr<const Storage> weak = s;
  s.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(sl->bytes()[1], std::byte{3});
  sl.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(CoreStorage, MappedFilesAndWindows) {
  testing::TempDir dir;
  write_text(dir.path() / "f.bin", "0123456789");
  auto file = MappedFile::open(dir.path() / "f.bin");
  EXPECT_EQ(file->size(), 10u);
  EXPECT_EQ(file->path(), (dir.path() / "f.bin").string());
  auto w = Storage::mapped(file, 2, 5);
  EXPECT_TRUE(w->is_mapped());
  EXPECT_EQ(w->file_offset(), 2u);
  EXPECT_EQ(static_cast<char>(w->bytes()[0]), '2');
  auto sub = Storage::slice(w, 1, 2);
  EXPECT_TRUE(sub->is_mapped());
  EXPECT_EQ(sub->file_offset(), 3u);
  EXPECT_EQ(sub->file(), file);
  const auto e = [&] {
    try {
      (void)Storage::mapped(file, 8, 3);
    } catch (const Error& e) {
      return e;
    }
    return Error(rules::kInternal, "no error");
  }();
  EXPECT_EQ(e.rule(), rules::kTruncated.id);
  EXPECT_EQ(e.file(), file->path());
  EXPECT_EQ(e.offset(), 8u);
  // Empty file: maps to an empty span.
  write_text(dir.path() / "empty", "");
  auto empty = MappedFile::open(dir.path() / "empty");
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_TRUE(empty->bytes().empty());
  // Errors name the file.
  EXPECT_EQ(testing::rule_of([&] { (void)MappedFile::open(dir.path() / "missing"); }), rules::kIoOpen.id);
  EXPECT_EQ(testing::rule_of([&] { (void)MappedFile::open(dir.path()); }), rules::kIoOpen.id);  // a directory
}

// ---- AtomicFileSink -----------------------------------------------------------------

TEST(CoreAtomicFile, CommitMakesTheFileAppear) {
  testing::TempDir dir;
  const fs::path target = dir.path() / "out.bin";
  {
    detail::io::AtomicFileSink sink(target);
    EXPECT_EQ(sink.temp_path().parent_path(), dir.path());  // same directory: rename is atomic
    EXPECT_NE(sink.temp_path().filename().string().find(detail::io::AtomicFileSink::kTempMarker), std::string::npos);
    put(sink, "hello ");
    // Larger than the 1 MiB buffer, to exercise the direct-write path too.
    const std::string big((1 << 20) + 17, 'x');
    put(sink, big);
    put(sink, "!");
    EXPECT_EQ(sink.position(), 6u + big.size() + 1u);
    EXPECT_FALSE(fs::exists(target));
    sink.commit();
    EXPECT_TRUE(fs::exists(target));
    EXPECT_FALSE(fs::exists(sink.temp_path()));
  }
  const std::string got = testing::read_all(target);
  EXPECT_EQ(got.size(), 6u + (1u << 20) + 17u + 1u);
  EXPECT_EQ(got.substr(0, 7), "hello x");
  EXPECT_EQ(got.back(), '!');
  EXPECT_EQ(dir.names(), std::vector<std::string>{"out.bin"});
}

TEST(CoreAtomicFile, DestroyedWithoutCommitLeavesNothing) {
  testing::TempDir dir;
  const fs::path target = dir.path() / "out.bin";
  fs::path temp;
  {
    detail::io::AtomicFileSink sink(target, /*fsync=*/false);
    temp = sink.temp_path();
    put(sink, std::string((2 << 20), 'y'));
    EXPECT_TRUE(fs::exists(temp));
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(dir.names().empty());
}

TEST(CoreAtomicFile, ExistingTargetKeepsItsContentUntilCommit) {
  testing::TempDir dir;
  const fs::path target = dir.path() / "model.safetensors";
  write_text(target, "old content");
  ::chmod(target.c_str(), 0600);
  {
    detail::io::AtomicFileSink sink(target);
    put(sink, "new");
    EXPECT_EQ(testing::read_all(target), "old content");
  }
  EXPECT_EQ(testing::read_all(target), "old content");  // abandoned writer: old file intact
  {
    detail::io::AtomicFileSink sink(target);
    put(sink, "new");
    EXPECT_EQ(testing::read_all(target), "old content");
    sink.commit();
  }
  EXPECT_EQ(testing::read_all(target), "new");
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);  // the mode of the replaced file is kept
  EXPECT_EQ(dir.names(), std::vector<std::string>{"model.safetensors"});
}

// The fds of this process open on (dev, ino).
int fds_on(dev_t dev, ino_t ino) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    struct stat st {};
    if (::fstat(std::stoi(e.path().filename().string()), &st) == 0 && st.st_dev == dev && st.st_ino == ino) ++n;
  }
  return n;
}

// A large replaced file is released by a helper after the rename (io/replaced_file.h):
// closed soon, and never open in a child forked right after the commit.
TEST(CoreAtomicFile, ReplacedFileIsReleasedAndNotInheritedByAFork) {
  testing::TempDir dir;
  const fs::path target = dir.path() / "big.pt";
  write_text(target, std::string(3 << 20, 'o'));
  struct stat old {};
  ASSERT_EQ(::stat(target.c_str(), &old), 0);
  for (int round = 0; round < 20; ++round) {
    {
      detail::io::AtomicFileSink sink(target, false);
      put(sink, std::string(3 << 20, static_cast<char>('a' + round)));
      sink.commit();
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(fds_on(old.st_dev, old.st_ino) == 0 ? 0 : 1);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child inherited the replaced file";
    for (int wait = 0; wait < 1000 && fds_on(old.st_dev, old.st_ino) > 0; ++wait) ::usleep(10000);
    EXPECT_EQ(fds_on(old.st_dev, old.st_ino), 0) << "the replaced file is still open";
    ASSERT_EQ(::stat(target.c_str(), &old), 0);  // the next round replaces this one
    EXPECT_EQ(testing::read_all(target), std::string(3 << 20, static_cast<char>('a' + round)));
  }
  EXPECT_EQ(dir.names(), std::vector<std::string>{"big.pt"});
}

TEST(CoreAtomicFile, StaleTempOfDeadWriterIsRemoved) {
  testing::TempDir dir;
  const fs::path target = dir.path() / "x.pt";
  // A temp file left by a writer whose pid no longer exists, and one by a live pid (ours).
  const std::string marker(detail::io::AtomicFileSink::kTempMarker);
  const fs::path stale = dir.path() / (".x.pt" + marker + "999999999.1");
  const fs::path live = dir.path() / (".x.pt" + marker + std::to_string(::getpid()) + ".2");
  const fs::path other = dir.path() / (".y.pt" + marker + "999999999.1");  // another target
  write_text(stale, "s");
  write_text(live, "l");
  write_text(other, "o");
  {
    detail::io::AtomicFileSink sink(target, false);
    sink.commit();
  }
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(target));
}

TEST(CoreAtomicFile, UnwritableDirectoryIsAnIoError) {
  const Error e = [] {
    try {
      detail::io::AtomicFileSink sink("/nonexistent-dir-tseal/x.bin");
    } catch (const Error& e) {
      return e;
    }
    return Error(rules::kInternal, "no error");
  }();
  EXPECT_EQ(e.rule(), rules::kIoOpen.id);
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_EQ(e.file(), "/nonexistent-dir-tseal/x.bin");
}

}  // namespace
}  // namespace tensorseal
