// Splitting a feed across places and merging what the places fetch, with
// Fluid's ParallelExecutor rules: a tensor is split along dim 0 (along LoD
// level 0 when it has LoD) into near-equal parts, the last place taking the
// remainder; fetched tensors are concatenated along dim 0.
//
// Thread-safety: stateless.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/executor.h"

namespace oar {

// One FeedMap per place. InvalidArgument when a tensor has fewer samples
// than places (naming it), or when the feeds disagree on the sample count.
absl::StatusOr<std::vector<FeedMap>> SplitFeed(const FeedMap& feed, size_t places);

// Checks a list feed (one FeedMap per place): its length must equal the
// place count.
absl::Status CheckFeedList(const std::vector<FeedMap>& feeds, size_t places);

// Concatenates per-place fetches (fetched[place][i]) along dim 0.
absl::StatusOr<std::vector<Tensor>> MergeFetched(const std::vector<std::vector<Tensor>>& fetched);

}  // namespace oar
