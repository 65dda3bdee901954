#include "cli/trainers_flag.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/flag_refusal.h"
#include "gflags/gflags.h"

DEFINE_string(trainers, "1",
              "the number of trainers; for an elastic job MIN:MAX, the fewest it goes on with and the most it may "
              "have (trainer ids 0..MAX-1)");
DEFINE_validator(trainers, [](const char*, const std::string& v) {
  const auto r = oar::cli::ParseTrainerRange(v, "--trainers");
  if (r.ok()) return true;
  return oar::RefuseFlagValue("give a number of trainers (4), or MIN:MAX for an elastic job (2:4)");
});

namespace oar::cli {

absl::StatusOr<TrainerRange> ParseTrainerRange(absl::string_view text, absl::string_view what) {
  TrainerRange r;
  const size_t colon = text.find(':');
  const bool ok = colon == absl::string_view::npos ? absl::SimpleAtoi(text, &r.max)
                                                   : absl::SimpleAtoi(text.substr(0, colon), &r.min) &&
                                                         absl::SimpleAtoi(text.substr(colon + 1), &r.max);
  if (colon == absl::string_view::npos) r.min = r.max;
  r.range = colon != absl::string_view::npos;
  if (!ok || r.min < 1 || r.max < r.min) {
    return absl::InvalidArgumentError(absl::StrCat(what, "='", text,
                                                   "': give a number of trainers (>= 1), or MIN:MAX with "
                                                   "1 <= MIN <= MAX for an elastic job"));
  }
  return r;
}

TrainerRange TrainersFromFlag() {
  auto r = ParseTrainerRange(FLAGS_trainers, "--trainers");
  return r.ok() ? *r : TrainerRange{};  // the validator let only good values in
}

absl::Status RefuseTrainerRange(absl::string_view command) {
  if (!TrainersFromFlag().range) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--trainers ", FLAGS_trainers, ": ", command,
                                                 " takes a number of trainers; MIN:MAX is for elastic jobs (oar "
                                                 "launch --elastic, oar run --elastic_server, oar deploy --elastic)"));
}

}  // namespace oar::cli
