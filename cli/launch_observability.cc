#include "cli/launch_observability.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/profiler/profiler.h"
#include "gflags/gflags.h"

DECLARE_bool(metrics);  // cli/launch_cmd.cc
DECLARE_string(metrics_dir);
DECLARE_string(timeline);

namespace oar::cli {

// --metrics: a free port per process (`ports`, picked with the endpoints'
// so that none is one of them), printed; a metrics file per process,
// written when it ends, in --metrics_dir or else in `scratch` (the time
// split at the end reads them; `files` gets their paths); --timeline: a
// trace per process in FILE.parts/, for MergeTimeline.
absl::Status AddObservabilityFlags(std::vector<ChildSpec>* specs, const std::vector<int>& ports,
                                   const std::string& scratch, std::vector<std::string>* files) {
  if (FLAGS_metrics) {
    if (ports.size() < specs->size()) {
      return absl::InternalError(absl::StrCat(specs->size(), " processes but ", ports.size(), " metrics ports"));
    }
    std::vector<std::string> where;
    for (size_t i = 0; i < specs->size(); ++i) {
      (*specs)[i].argv.push_back(absl::StrCat("--metrics_port=", ports[i]));
      where.push_back(absl::StrCat((*specs)[i].name, " http://127.0.0.1:", ports[i], "/metrics"));
    }
    std::fprintf(stderr, "oar launch: metrics: %s\n", absl::StrJoin(where, ", ").c_str());
  }
  const std::string dir = FLAGS_metrics_dir.empty() ? scratch : FLAGS_metrics_dir;
  for (auto& s : *specs) {
    files->push_back(absl::StrCat(dir, "/", s.name, ".prom"));
    s.argv.push_back("--metrics_file=" + files->back());
  }
  if (!FLAGS_timeline.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(FLAGS_timeline + ".parts", ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("--timeline: ", FLAGS_timeline, ".parts: ", ec.message()));
    for (auto& s : *specs)
      s.argv.push_back(absl::StrCat("--profile_path=", FLAGS_timeline, ".parts/", s.name, ".json"));
  }
  return absl::OkStatus();
}

// The processes' traces in --timeline, one lane each in launch order, and
// the parts removed.
absl::Status MergeTimeline(const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  for (const auto& n : names) parts.push_back(absl::StrCat(FLAGS_timeline, ".parts/", n, ".json"));
  OAR_RETURN_IF_ERROR(Annotate(MergeTraces(parts, FLAGS_timeline), "--timeline"));
  std::error_code ec;
  std::filesystem::remove_all(FLAGS_timeline + ".parts", ec);
  std::fprintf(stderr, "oar launch: timeline of %zu processes in %s (open in chrome://tracing or ui.perfetto.dev)\n",
               names.size(), FLAGS_timeline.c_str());
  return absl::OkStatus();
}

}  // namespace oar::cli
