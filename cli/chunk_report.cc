#include "cli/chunk_report.h"

#include <cstdio>
#include <string>

namespace oar::cli {

const ChunkMetrics& GetChunkMetrics() {
  static const ChunkMetrics m = [] {
    metrics::Registry& r = metrics::Default();
    return ChunkMetrics{
        r.AddCounter("oar_trainer_elastic_chunks_total", "Data chunks this trainer trained and reported done")
            ->With({}),
        r.AddCounter("oar_trainer_elastic_chunks_lost_total",
                     "Chunks this trainer trained but lost to another (its lease ran out meanwhile)")
            ->With({}),
        r.AddCounter("oar_trainer_elastic_chunks_requeued_total",
                     "Chunks this trainer took that a trainer which left had left unfinished")
            ->With({})};
  }();
  return m;
}

void ChunkReport::Start(elastic::TaskQueue* q, int epoch, int64_t chunk, int64_t examples) {
  Settle();
  // Said as soon as etcd took it, under the mutex a leaving trainer takes
  // first: a SIGTERM never ends the process between the two.
  done_ = std::async(std::launch::async, [q, epoch, chunk, examples, trainer = trainer_] {
    absl::MutexLock l(&ChunkReportMutex());
    absl::Status s = q->Done(epoch, chunk);
    if (s.ok()) {
      std::printf("@oar chunk trainer=%d epoch=%d chunk=%lld examples=%lld\n", trainer, epoch,
                  static_cast<long long>(chunk), static_cast<long long>(examples));
      std::fflush(stdout);
    }
    return s;
  });
}

absl::Mutex& ChunkReportMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

void ChunkReport::Settle() {
  if (!done_.valid()) return;
  const absl::Status done = done_.get();
  if (!done.ok()) {
    // Cut off from etcd past its lease while it trained: the chunk is
    // another trainer's now. Its updates were sent (a failure is said, not
    // returned).
    std::fprintf(stderr, "trainer %d: %s; its updates from that chunk were applied all the same\n", trainer_,
                 std::string(done.message()).c_str());
    metrics_.lost->Add();
    return;
  }
  metrics_.done->Add();
}

}  // namespace oar::cli
