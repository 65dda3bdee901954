// The trainers' guard against a diverged training: a loss that is NaN or
// Inf ends the run at that step, saying where and what to try, instead of
// training on (every step after it is wasted, and a checkpoint saved then
// holds NaN). `oar train` and `oar run` call it on every step's loss.
//
// Thread-safety: a pure function.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace oar::cli {

// `who`: "" or "trainer 1 " (the prefix of the message).
inline absl::Status CheckLossFinite(double loss, int64_t step, int epoch, const std::string& who = "") {
  if (std::isfinite(loss)) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(
      who, "the loss is ", std::isnan(loss) ? "NaN" : "Inf", " at step ", step, " (epoch ", epoch,
      "): the training diverged. Try a lower --lr; --check_nan_inf (FLAGS_check_nan_inf=1) names the first op that "
      "wrote a NaN or Inf"));
}

}  // namespace oar::cli
