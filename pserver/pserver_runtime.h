// RunPserver: what a pserver process does with its programs: runs the
// startup program (its parameter blocks and optimizer state), then the main
// program, whose listen_and_serv serves until every trainer has said
// COMPLETE (or SIGTERM/SIGINT ends it after the step in progress). With a
// checkpoint directory, a pserver that finds its own checkpoint there
// (<dir>/pserver_<id>, written on the trainers' checkpoint_notify) restores
// it and rejoins the running job. `init`, when given, runs after the
// startup program on the pserver's scope (e.g. to load saved parameters).
// `profiler`, when given, times the serving's optimize ops and requests.
// `rpc` configures its transport; `port_file`, when set, gets the bound
// port (written atomically) once it serves.
//
// Thread-safety: blocks the calling thread; one call per process.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/framework/executor.h"
#include "common/framework/program_desc.h"
#include "common/rpc/rpc_options.h"

namespace oar {

class Profiler;  // common/profiler/profiler.h

using PserverInit = std::function<absl::Status(Executor& exe, Scope* scope)>;

struct PserverRunOptions {
  std::string checkpoint_dir = {};
  PserverInit init = nullptr;
  Profiler* profiler = nullptr;
  rpc::RpcOptions rpc = {};
  std::string port_file = {};
  // An elastic async job: its trainers as etcd lists them (RunEnv).
  std::function<TrainerMembers()> trainer_members = nullptr;
  // An elastic sync job: how its pservers agree on a departed trainer's steps (RunEnv).
  AgreeOnLeave agree_on_leave = nullptr;
};

absl::Status RunPserver(const ProgramDesc& main, const ProgramDesc& startup, const PserverRunOptions& options = {});

}  // namespace oar
