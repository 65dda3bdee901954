// LineReader: the lines of a file descriptor, read in large blocks and
// handed out as views into the reader's buffer (no copy per line, no stdio
// lock per line). A line's view excludes its '\n'; a last line without one
// is still a line. A line longer than the buffer grows it.
//
//   LineReader lines(fd);
//   std::string_view line;
//   while (true) {
//     OAR_ASSIGN_OR_RETURN(bool more, lines.Next(&line));
//     if (!more) break;
//     ...  // `line` stays valid until the next call
//   }
//
// The reader does not own the descriptor. A read error is an error
// carrying errno's text.
//
// Thread-safety: externally synchronized.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace oar {

class LineReader {
 public:
  explicit LineReader(int fd, size_t block_bytes = 1 << 20);
  absl::StatusOr<bool> Next(std::string_view* line);

 private:
  int fd_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;  // unread bytes: buf_[begin_, end_)
  size_t scanned_ = 0;          // bytes past begin_ known to hold no '\n'
  bool eof_ = false;
};

}  // namespace oar
