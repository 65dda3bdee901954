// TrainerRun: which run of one trainer a message comes from, told by the
// incarnation in its oar_seq (rpc::IncarnationOf; one per RpcClient, so one
// per trainer process). The latest run is the one served; a run it replaced
// (a restarted trainer's earlier process, whose late messages may still
// arrive) is remembered — the last kKept of them — so its messages can be
// told apart instead of being taken for a newer run. Incarnation 0 (Fluid's
// clients, which send none) is always taken as the latest.
//
// Used by ReplayGuard (a fresh table per run) and StepBarrier (a count of
// stored gradients per run).
//
// Thread-safety: a value; its owner serializes access.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace oar {

class TrainerRun {
 public:
  static constexpr size_t kKept = 16;
  enum class Seen { kLatest, kNew, kReplaced };

  // kNew: `incarnation` has just become the latest (the previous one, if
  // any, is now replaced). kReplaced: a run that was replaced.
  Seen Observe(uint64_t incarnation) {
    if (incarnation == latest_ || incarnation == 0) return Seen::kLatest;
    if (std::find(replaced_.begin(), replaced_.end(), incarnation) != replaced_.end()) return Seen::kReplaced;
    if (latest_ != 0) {
      replaced_.push_back(latest_);
      if (replaced_.size() > kKept) replaced_.erase(replaced_.begin());
    }
    latest_ = incarnation;
    return Seen::kNew;
  }
  uint64_t latest() const { return latest_; }
  // Whether `incarnation` is the latest run, or no run is known yet (or it
  // is Fluid's 0), without observing it.
  bool LatestOrFirst(uint64_t incarnation) const { return incarnation == 0 || latest_ == 0 || incarnation == latest_; }
  // Whether a run before the latest was seen (the trainer restarted).
  bool restarted() const { return !replaced_.empty(); }

 private:
  uint64_t latest_ = 0;
  std::vector<uint64_t> replaced_;  // oldest first
};

}  // namespace oar
