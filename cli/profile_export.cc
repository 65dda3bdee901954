#include "cli/profile_export.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_bool(profile, false, "print Fluid's profiler table (per op: calls, total, min, max, average, ratio) at the end");
DEFINE_string(profile_sorted_key, "total", "the table's order: calls, total, max, min or ave (Fluid's sorted_key)");
DEFINE_string(profile_path, "", "write this process's ops and RPCs as a Chrome trace (chrome://tracing, Perfetto)");

namespace oar::cli {

absl::StatusOr<std::unique_ptr<ProfileExport>> ProfileExport::FromFlags(const std::string& who) {
  auto e = std::unique_ptr<ProfileExport>(new ProfileExport());
  e->who_ = who;
  absl::Status s = Profiler::ParseSortedKey(FLAGS_profile_sorted_key, &e->key_);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--profile_", s.message()));
  if (FLAGS_profile || !FLAGS_profile_path.empty()) e->profiler_ = std::make_unique<Profiler>();
  return e;
}

ProfileExport::~ProfileExport() {
  if (profiler_ == nullptr) return;
  if (FLAGS_profile) std::fprintf(stderr, "%s", profiler_->Report(key_).c_str());
  if (!FLAGS_profile_path.empty()) {
    absl::Status s = profiler_->WriteTrace(FLAGS_profile_path, who_);
    if (!s.ok()) LOG(WARNING) << who_ << ": --profile_path: " << s;
  }
}

}  // namespace oar::cli
