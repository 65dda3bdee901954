// GlobalShuffle: Fluid's InMemoryDataset.global_shuffle() across the
// trainers of a job. Each record this trainer holds goes to a trainer drawn
// at random (std::mt19937_64 seeded by (seed, rank)); every trainer ends
// with the records sent to it, from every trainer in rank order. So the
// trainers' sets are disjoint, their union is every record, and each holds
// about 1/size of them whatever the files' sizes were.
//
// The records travel through the job's own communicator (ShuffleGroup: the
// nccl2 trainers' ring or shared memory, trainer/collective), one round per
// destination: in round d every trainer all-gathers the records it has for
// d, and d keeps them — memory per round is one destination's share.
// Records are text lines (no '\n').
//
// Thread-safety: a blocking call; every trainer of the group calls it at
// the same point (it is a sequence of collective operations).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/tensor.h"

namespace oar {

struct ShuffleGroup {
  int rank = 0, size = 1;
  // Every rank's uint8 tensor (sizes may differ), in rank order.
  std::function<absl::Status(const Tensor& in, std::vector<Tensor>* out)> all_gather = nullptr;
};

absl::StatusOr<std::vector<std::string>> GlobalShuffle(std::vector<std::string> records, uint64_t seed,
                                                       const ShuffleGroup& group);

}  // namespace oar
