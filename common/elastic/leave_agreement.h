// AgreeOnLastStep: how an elastic sync job's pservers agree on the last step
// a departed trainer contributed to, so that every pserver applies the same
// steps with its gradients (pserver/departure_watch.h). Each pserver writes
// what it saw — the step it was collecting, whether the trainer contributed
// to it (its BATCH_BARRIER came with gradients) and to the step before — to
//   /oar/<job>/leaves/<leave>/<pserver index>  =  "<step> <0|1> <0|1>"
// and reads everyone's (waiting up to `timeout` for all `pservers`). A
// trainer sends all its gradients of a step before its first BATCH_BARRIER
// and fetches a step from every pserver before it computes the next, so
// the pservers are at most one step apart and a barrier seen by any one of
// them means every one holds its gradients: the last step is the highest
// step any pserver saw it contribute to, or `none`.
//
// Thread-safety: a plain function; the client is safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/elastic/etcd_client.h"

namespace oar::elastic {

struct StepView {
  int64_t step = 0;
  bool contributed = false, contributed_before = false;
};

// `leave` names the departure uniquely in the job (the trainer, the step it
// joined at, which process it was).
absl::StatusOr<int64_t> AgreeOnLastStep(EtcdClient* etcd, const std::string& job, const std::string& leave, int pserver,
                                        int pservers, const StepView& mine, int64_t none, absl::Duration timeout);

}  // namespace oar::elastic
