// How a trainer of an elastic pserver job reaches the job's pservers when
// it joins a running job, and what it does when the job ends first.
//
// A trainer added late (oar launch's chaos add, kubectl scale) registers in
// etcd and then waits for the pservers. If the others train the last chunks
// meanwhile, the pservers end (they wait only for trainers that joined
// their steps) and then say so in etcd (MarkElasticJobDone). The joiner
// must then end cleanly, with nothing to train, rather than fail after
// --rpc_deadline for pservers that are gone: WaitForElasticPservers asks
// etcd while it waits; JobEndedOr asks after a later step of joining
// failed.
//
// Thread-safety: plain functions, called on the trainer's main thread; the
// client is safe for concurrent use.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/elastic_job.h"
#include "common/rpc/rpc_client.h"

namespace oar::cli {

// Waits up to the client's deadline for every pserver to answer, asking
// etcd every half second whether the job has ended. Ended: says so on
// stderr, sets *ended and returns Cancelled. Not reachable in time:
// DeadlineExceeded naming the pservers that did not answer.
absl::Status WaitForElasticPservers(const ElasticJob& job, rpc::RpcClient* client,
                                    const std::vector<std::string>& pservers, bool* ended);

// `failed`, a step of joining the pservers that did not succeed, unless
// the job has ended (polled for up to a second: the pservers say so in etcd
// just after they close): then as WaitForElasticPservers.
absl::Status JobEndedOr(const ElasticJob& job, absl::Status failed, bool* ended);

}  // namespace oar::cli
