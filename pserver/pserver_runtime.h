// RunPserver: what a pserver process does with its programs: runs the
// startup program (its parameter blocks and optimizer state), then the main
// program, whose listen_and_serv serves until every trainer has said
// COMPLETE (or SIGTERM/SIGINT ends it after the step in progress). With a
// checkpoint directory, a pserver that finds its own checkpoint there
// (<dir>/pserver_<id>, written on the trainers' checkpoint_notify) restores
// it and rejoins the running job.
//
// Thread-safety: blocks the calling thread; one call per process.
#pragma once

#include "absl/status/status.h"
#include <string>

#include "common/program_desc.h"

namespace oar {

absl::Status RunPserver(const ProgramDesc& main, const ProgramDesc& startup, const std::string& checkpoint_dir = "");

}  // namespace oar
