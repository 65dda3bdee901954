// LeaveOnSigterm: an elastic job's trainer asked to stop — SIGTERM, as
// Kubernetes sends when `kubectl scale` removes its pod or a node is
// drained or preempted, and as `oar launch --chaos 'stop trainer N at step
// S'` sends — leaves the job at once: its membership's lease is revoked, so
// the others go on without it from their next step (the pservers drop it
// and agree on its last step; a ring's trainers regroup) and its unfinished
// chunk goes back to the queue, without waiting out the lease (--rpc_deadline).
// It then ends as SIGTERM would have ended it (a step it was part of is
// discarded whole, as a dead trainer's is). A trainer that dies without
// notice (SIGKILL, a lost machine) is still dropped when its lease runs out.
//
//   std::optional<LeaveOnSigterm> leave;
//   if (trainer) leave.emplace(job.get());
//
// Every wait is bounded: for a chunk's report in flight to etcd, 5 s; for
// the lease's revoke, the etcd client's deadline.
//
// Thread-safety: construct and destroy on the main thread; the signal is
// handled on a thread of its own (Membership::Leave is safe from any thread).
#pragma once

#include <memory>

#include "cli/elastic_job.h"

namespace oar::cli {

class LeaveOnSigterm {
 public:
  explicit LeaveOnSigterm(ElasticJob* job);
  ~LeaveOnSigterm();
  LeaveOnSigterm(const LeaveOnSigterm&) = delete;
  LeaveOnSigterm& operator=(const LeaveOnSigterm&) = delete;

 private:
  struct Watch;  // the Asio signal set and its thread
  std::unique_ptr<Watch> watch_;
};

}  // namespace oar::cli
