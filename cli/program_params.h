// --params for a program file: Paddle's save_persistables output (a
// directory of per-variable files, or one combined file) loaded over the
// startup program's values, each loaded variable checked against the shape
// the program declares (load ops take whatever a file holds; parameters of
// another network fail here, named). Used by `oar train`, `oar
// async-train` and nccl2 trainers (pserver jobs load on the pservers:
// pserver_params.h).
//
// Thread-safety: runs on the calling thread.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/framework/executor.h"

namespace oar::cli {

absl::Status LoadProgramParams(Executor& exe, Scope* scope, const std::string& path, const ProgramDesc& main);

}  // namespace oar::cli
