#include "common/data/multi_slot_feed.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include "common/base/status.h"

namespace oar {

bool FileQueue::Next(std::string* file) {
  absl::MutexLock l(&mu_);
  if (next_ >= files_.size()) return false;
  *file = files_[next_++];
  return true;
}

void FeedStats::NoteBadLine(const std::string& message) {
  bad_lines.fetch_add(1);
  absl::MutexLock l(&mu_);
  if (first_.empty()) first_ = message;
}

std::string FeedStats::first_bad_line() const {
  absl::MutexLock l(&mu_);
  return first_;
}

MultiSlotDataFeed::MultiSlotDataFeed(const DataFeedDesc& desc, FileQueue* files, FeedStats* stats, Options options)
    : desc_(desc), files_(files), stats_(stats), options_(options), batch_(desc_) {}

MultiSlotDataFeed::~MultiSlotDataFeed() { (void)Close(); }

absl::Status MultiSlotDataFeed::Open(const std::string& file) {
  file_ = file;
  line_no_ = 0;
  piped_ = !desc_.pipe_command().empty();
  if (piped_) {
    const std::string quoted = "'" + absl::StrReplaceAll(file, {{"'", "'\\''"}}) + "'";
    in_ = popen((desc_.pipe_command() + " < " + quoted).c_str(), "r");
  } else {
    in_ = std::fopen(file.c_str(), "r");
  }
  if (in_ == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read '", file, "'", piped_ ? " through the pipe command" : "", ": ",
                                            std::strerror(errno)));
  }
  lines_.emplace(fileno(in_));
  stats_->files.fetch_add(1);
  return absl::OkStatus();
}

absl::Status MultiSlotDataFeed::Close() {
  if (in_ == nullptr) return absl::OkStatus();
  std::FILE* in = in_;
  in_ = nullptr;
  lines_.reset();
  if (!piped_) {
    std::fclose(in);
    return absl::OkStatus();
  }
  const int status = pclose(in);
  if (status != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return absl::InvalidArgumentError(
        absl::StrCat("pipe_command '", desc_.pipe_command(), "' failed on '", file_, "' (exit status ", code, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> MultiSlotDataFeed::NextLine(std::string_view* line) {
  while (true) {
    if (in_ == nullptr) {
      std::string file;
      if (!files_->Next(&file)) return false;
      OAR_RETURN_IF_ERROR(Open(file));
    }
    absl::StatusOr<bool> more = lines_->Next(line);
    if (!more.ok()) {
      return absl::DataLossError(
          absl::StrCat("reading '", file_, "' after line ", line_no_, ": ", more.status().message()));
    }
    if (!*more) {
      OAR_RETURN_IF_ERROR(Close());
      continue;
    }
    ++line_no_;
    if (options_.line_shards > 1 && (line_no_ - 1) % options_.line_shards != options_.line_shard) continue;
    while (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    if (line->find_first_not_of(" \t") == std::string_view::npos) continue;  // a blank line
    return true;
  }
}

absl::StatusOr<bool> MultiSlotDataFeed::Next(std::vector<Tensor>* batch) {
  int64_t lines = 0, instances = 0;  // counted here, added to the shared stats once per batch
  absl::Cleanup publish = [&] {
    stats_->lines.fetch_add(lines);
    stats_->instances.fetch_add(instances);
  };
  while (batch_.size() < desc_.batch_size()) {
    std::string_view line;
    OAR_ASSIGN_OR_RETURN(const bool more, NextLine(&line));
    if (!more) break;
    ++lines;
    absl::Status s = batch_.AddLine(line);
    if (!s.ok()) {
      const std::string where = absl::StrCat(file_, ":", line_no_, ": ", s.message());
      if (!options_.skip_bad_lines) return absl::InvalidArgumentError(where);
      stats_->NoteBadLine(where);
      continue;
    }
    ++instances;
  }
  if (batch_.size() == 0) return false;
  *batch = batch_.Take();
  return true;
}

}  // namespace oar
