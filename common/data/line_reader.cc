#include "common/data/line_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace oar {

LineReader::LineReader(int fd, size_t block_bytes) : fd_(fd), buf_(block_bytes) {}

absl::StatusOr<bool> LineReader::Next(std::string_view* line) {
  while (true) {
    const char* from = buf_.data() + begin_ + scanned_;
    if (const void* nl = std::memchr(from, '\n', end_ - begin_ - scanned_); nl != nullptr) {
      const size_t stop = static_cast<const char*>(nl) - buf_.data();
      *line = std::string_view(buf_.data() + begin_, stop - begin_);
      begin_ = stop + 1;
      scanned_ = 0;
      return true;
    }
    scanned_ = end_ - begin_;
    if (eof_) {
      if (begin_ == end_) return false;
      *line = std::string_view(buf_.data() + begin_, end_ - begin_);  // the last line, with no '\n'
      begin_ = end_;
      scanned_ = 0;
      return true;
    }
    // Make room: move the partial line to the front, grow when it fills the buffer.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    ssize_t n;
    do {
      n = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return absl::DataLossError(absl::StrCat("read failed: ", std::strerror(errno)));
    if (n == 0) eof_ = true;
    end_ += static_cast<size_t>(n);
  }
}

}  // namespace oar
