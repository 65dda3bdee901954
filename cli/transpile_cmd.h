// What `oar transpile` shares with `oar run`: the DistributeTranspilerConfig
// its flags describe (--mode, --sync/--async, --min_block_size, --no_slice,
// --split_method, --runtime_split_send_recv) and reading program files.
//
// Thread-safety: reads flags; call from main()'s thread.
#pragma once

#include <string>

#include <memory>

#include "absl/status/statusor.h"
#include "cli/model_build.h"
#include "common/framework/program_desc.h"
#include "transpiler/transpiler_config.h"

namespace oar::cli {

absl::StatusOr<DistributeTranspilerConfig> TranspilerConfigFromFlags();
// `flag` names the flag the path came from, for the error.
absl::StatusOr<ProgramDesc> ReadProgram(const std::string& path, const char* flag);

// The programs to distribute: the --program/--startup files, or else the
// --model built from the flags (then also kept in *model).
absl::Status ProgramsFromFlags(ProgramDesc* main, ProgramDesc* startup, std::unique_ptr<ModelPrograms>* model);

}  // namespace oar::cli
