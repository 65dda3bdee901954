// LineReader: every line of a file comes back as written, across block
// boundaries, longer than the block (the buffer grows), blank, with '\r',
// and as a last line without '\n'.
#include "common/data/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace oar {
namespace {

std::vector<std::string> ReadAll(const std::string& text, size_t block) {
  const std::string path = ::testing::TempDir() + "/line_reader_" + std::to_string(block);
  std::ofstream(path, std::ios::binary) << text;
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  LineReader reader(fd, block);
  std::vector<std::string> lines;
  std::string_view line;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&line);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    lines.emplace_back(line);
  }
  ::close(fd);
  return lines;
}

TEST(LineReaderTest, ReturnsEveryLineAsWritten) {
  std::mt19937 rng(3);
  std::vector<std::string> want;
  std::string text;
  for (int i = 0; i < 500; ++i) {
    std::string line(rng() % (i % 50 == 0 ? 300 : 40), 'a' + static_cast<char>(i % 26));
    if (i % 7 == 0) line += '\r';
    want.push_back(line);
    text += line + "\n";
  }
  want.push_back("last line, no newline");
  text += want.back();
  for (size_t block : {7, 64, 1000, 1 << 20}) EXPECT_EQ(ReadAll(text, block), want) << "block " << block;
}

TEST(LineReaderTest, EmptyFileAndTrailingNewline) {
  EXPECT_TRUE(ReadAll("", 16).empty());
  EXPECT_EQ(ReadAll("\n\nx\n", 16), (std::vector<std::string>{"", "", "x"}));
}

TEST(LineReaderTest, AReadErrorIsAnError) {
  LineReader reader(-1);
  std::string_view line;
  EXPECT_EQ(reader.Next(&line).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace oar
