// What `oar launch` adds to each child's flags to observe the job, and
// what it makes of them at the end: --metrics (a port per process, served
// on a socket the launcher made, printed at the start), a metrics file per
// process (in --metrics_dir, else a scratch folder, for the summary's time
// split), and --timeline (a trace per process, merged into one).
//
// Thread-safety: plain functions, called from the launcher's main thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/process_group.h"

namespace oar::cli {

// --metrics: a free port per process (`ports`, picked with the endpoints'
// so that none is one of them), printed; a metrics file per process,
// written when it ends, in --metrics_dir or else in `scratch` (the time
// split at the end reads them; `files` gets their paths); --timeline: a
// trace per process in FILE.parts/, for MergeTimeline.
absl::Status AddObservabilityFlags(std::vector<ChildSpec>* specs, const std::vector<int>& ports,
                                   const std::string& scratch, std::vector<std::string>* files);

// The processes' traces in --timeline, one lane each in launch order, and
// the parts removed.
absl::Status MergeTimeline(const std::vector<std::string>& names);

}  // namespace oar::cli
