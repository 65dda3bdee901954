#include "cli/elastic_leave.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/chunk_report.h"

namespace oar::cli {

struct LeaveOnSigterm::Watch {
  explicit Watch(ElasticJob* j) : job(j), signals(io, SIGTERM) {}
  ElasticJob* job;
  boost::asio::io_context io;
  boost::asio::signal_set signals;
  std::thread thread;
};

namespace {

// A report in flight waits on etcd for at most its client's deadline; a
// stop waits for it this long at most (Kubernetes' grace is 30 s by default).
constexpr absl::Duration kReportWait = absl::Seconds(5);

// Leaves the job and ends the process by SIGTERM. The chunk-report mutex
// is taken and never given back: no report is cut in half, none follows
// (unless one hung on etcd past kReportWait: then the leave goes ahead).
void LeaveAndEnd(ElasticJob* job, boost::asio::signal_set* signals) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const absl::Time give_up = absl::Now() + kReportWait;
  bool held = ChunkReportMutex().TryLock();
  while (!held && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
    held = ChunkReportMutex().TryLock();
  }
  if (!held) {
    std::fprintf(stderr, "%s: SIGTERM: a chunk's report to etcd is still in flight after %s; leaving anyway\n",
                 job->member.c_str(), absl::FormatDuration(kReportWait).c_str());
  }
  const absl::Status left = job->me->Leave();
  if (left.ok()) {
    std::fprintf(stderr,
                 "%s: SIGTERM: left the job (its membership revoked: the others go on without it from their next "
                 "step; its unfinished chunk, if any, goes back to the queue)\n",
                 job->member.c_str());
  } else {
    std::fprintf(stderr,
                 "%s: SIGTERM: could not leave the job at once (%s); the others drop it when its lease runs out\n",
                 job->member.c_str(), std::string(left.message()).c_str());
  }
  std::fflush(stderr);
  boost::system::error_code ignored;
  signals->clear(ignored);
  std::signal(SIGTERM, SIG_DFL);
  std::raise(SIGTERM);  // ends as the signal would have
}

}  // namespace

LeaveOnSigterm::LeaveOnSigterm(ElasticJob* job) : watch_(std::make_unique<Watch>(job)) {
  Watch* w = watch_.get();
  w->signals.async_wait([w](const boost::system::error_code& ec, int) {
    if (!ec) LeaveAndEnd(w->job, &w->signals);  // else cancelled: the process ends on its own
  });
  w->thread = std::thread([w] { w->io.run(); });
}

LeaveOnSigterm::~LeaveOnSigterm() {
  // On the set's own thread (a signal_set is not for two threads at once):
  // SIGTERM's default comes back, the wait ends, and so does run().
  Watch* w = watch_.get();
  boost::asio::post(w->io, [w] {
    boost::system::error_code ignored;
    w->signals.clear(ignored);
    w->signals.cancel(ignored);
  });
  w->thread.join();
}

}  // namespace oar::cli
