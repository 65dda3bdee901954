// MultiSlotDataFeed: reads MultiSlot files (multi_slot_batch.h) into batches
// for one thread; the threads of a run share one FileQueue, so each file is
// read by exactly one of them, whole.
//
// With a pipe_command in the DataFeedDesc each file is read through it
// (`/bin/sh -c '<command> < <file>'`, e.g. `zcat`); a command that fails
// is an error naming it and the file. A malformed line is an error naming
// file, line number and slot; with skip_bad_lines it is counted in the
// shared FeedStats (which keeps the first one's message) and skipped.
//
//   FileQueue files({"part-0", "part-1"});
//   FeedStats stats;
//   MultiSlotDataFeed feed(desc, &files, &stats);
//   std::vector<Tensor> batch;
//   while (true) {
//     OAR_ASSIGN_OR_RETURN(bool more, feed.Next(&batch));
//     if (!more) break;
//     ...  // batch[k] is the k-th used slot, named feed.names()[k]
//   }
//
// Thread-safety: FileQueue and FeedStats are safe for concurrent use; a
// MultiSlotDataFeed belongs to one thread.
#pragma once

#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data/data_feed_desc.h"
#include "common/data/line_reader.h"
#include "common/data/multi_slot_batch.h"

namespace oar {

class FileQueue {
 public:
  explicit FileQueue(std::vector<std::string> files) : files_(std::move(files)) {}
  // The next file no thread has taken; false when none is left.
  bool Next(std::string* file);

 private:
  absl::Mutex mu_;
  std::vector<std::string> files_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

struct FeedStats {
  std::atomic<int64_t> files{0}, lines{0}, instances{0}, bad_lines{0};
  void NoteBadLine(const std::string& message);
  std::string first_bad_line() const;

 private:
  mutable absl::Mutex mu_;
  std::string first_ ABSL_GUARDED_BY(mu_);
};

struct MultiSlotFeedOptions {
  bool skip_bad_lines = false;
  // Sharding by record: only lines whose number in their file, from 0, is
  // ≡ line_shard (mod line_shards) are read (when a job has fewer files
  // than trainers, each trainer reads every file and takes its lines).
  int64_t line_shard = 0, line_shards = 1;
};

class MultiSlotDataFeed {
 public:
  using Options = MultiSlotFeedOptions;
  MultiSlotDataFeed(const DataFeedDesc& desc, FileQueue* files, FeedStats* stats, Options options = {});
  ~MultiSlotDataFeed();
  MultiSlotDataFeed(const MultiSlotDataFeed&) = delete;
  MultiSlotDataFeed& operator=(const MultiSlotDataFeed&) = delete;

  // The next batch (batch_size instances; the last may hold fewer), one
  // tensor per used slot. false when every file has been read.
  absl::StatusOr<bool> Next(std::vector<Tensor>* batch);
  const std::vector<std::string>& names() const { return batch_.names(); }
  // Instead of Next: the next line of this feed's share, unparsed (valid
  // until the next call), with where() naming it; false when every file has
  // been read. InMemorySource keeps the lines and parses them per epoch.
  absl::StatusOr<bool> NextLine(std::string_view* line);
  std::string where() const { return file_ + ":" + std::to_string(line_no_); }

 private:
  absl::Status Open(const std::string& file);
  absl::Status Close();  // the current file; a failed pipe command is an error

  const DataFeedDesc desc_;
  FileQueue* files_;
  FeedStats* stats_;
  const Options options_;
  MultiSlotBatch batch_;
  std::FILE* in_ = nullptr;
  bool piped_ = false;
  std::string file_;
  std::optional<LineReader> lines_;  // of in_
  int64_t line_no_ = 0;
};

}  // namespace oar
