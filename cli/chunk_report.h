// ChunkReport: an elastic trainer's report that it trained a chunk, made
// to etcd (TaskQueue::Done, a transaction) on a thread while the trainer
// trains its next chunk — in a sync job every other trainer would otherwise
// wait it out at the barrier — and, once etcd took it, said on stdout as
//   @oar chunk trainer=2 epoch=1 chunk=5 examples=1875
// which `oar launch` checks against etcd's record. The two happen under
// ChunkReportMutex(), which a trainer leaving on SIGTERM takes first
// (cli/elastic_leave.h): only a trainer that dies without notice can end
// between them. Also the chunk metrics (oar_trainer_elastic_chunks_total,
// ..._lost_total, ..._requeued_total).
//
// Thread-safety: a ChunkReport belongs to the trainer's training thread;
// the report itself runs on a thread of its own, settled (waited for)
// before the next is started and when the ChunkReport goes out of scope.
#pragma once

#include <cstdint>
#include <future>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/elastic/task_queue.h"
#include "common/metrics/metrics.h"

namespace oar::cli {

struct ChunkMetrics {
  metrics::Counter *done, *lost, *requeued;
};

// The process's chunk metrics, registered on first use.
const ChunkMetrics& GetChunkMetrics();

// Held while a chunk's report is made to etcd and said on stdout; a trainer
// leaving on SIGTERM takes it and never gives it back (it ends).
absl::Mutex& ChunkReportMutex();

class ChunkReport {
 public:
  ChunkReport(int trainer, const ChunkMetrics& metrics) : trainer_(trainer), metrics_(metrics) {}
  ~ChunkReport() { Settle(); }
  ChunkReport(const ChunkReport&) = delete;
  ChunkReport& operator=(const ChunkReport&) = delete;

  // Settles the report before, then reports `chunk` of `epoch` done.
  void Start(elastic::TaskQueue* q, int epoch, int64_t chunk, int64_t examples);
  // Waits for the report in flight, if any; says a failed one (the chunk is
  // another trainer's now) and counts it.
  void Settle();

 private:
  const int trainer_;
  const ChunkMetrics& metrics_;
  std::future<absl::Status> done_;
};

}  // namespace oar::cli
