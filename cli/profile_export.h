// What `oar train` and `oar run` do with a Profiler (common/profiler):
// --profile prints Fluid's per-op table when the command ends (sorted by
// --profile_sorted_key: calls, total, max, min, ave); --profile_path writes
// the process's spans as a Chrome trace (oar launch --timeline merges
// them, one lane per process).
//
//   OAR_ASSIGN_OR_RETURN(auto profile, ProfileExport::FromFlags("trainer 0"));
//   env.profiler = profile->profiler();  // null when neither flag is given
//   ... train ...
//   // the destructor prints the table and writes the trace
//
// Thread-safety: owned by the command's main thread; profiler() is safe
// for concurrent use.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/profiler/profiler.h"

namespace oar::cli {

class ProfileExport {
 public:
  // InvalidArgument for a --profile_sorted_key that is not Fluid's.
  static absl::StatusOr<std::unique_ptr<ProfileExport>> FromFlags(const std::string& who);
  ~ProfileExport();

  Profiler* profiler() { return profiler_.get(); }

 private:
  std::unique_ptr<Profiler> profiler_;
  Profiler::SortedKey key_ = Profiler::SortedKey::kTotal;
  std::string who_;
};

}  // namespace oar::cli
