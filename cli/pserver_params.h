// Starting a pserver from parameters saved elsewhere (`oar run/launch
// --params`, e.g. Paddle's save_persistables output): the values are loaded
// with the origin (untranspiled) program into a scratch scope, then each of
// the pserver's persistables takes its part — a whole variable as it is, a
// parameter block (`fc_w.block1`) its rows of the parameter, and an
// optimizer accumulator of that block (it keeps its origin name with the
// block's shape, as in Fluid) the same rows of the saved accumulator.
//
// Thread-safety: call once, before the pserver serves.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/executor.h"
#include "transpiler/transpile_state.h"

namespace oar::cli {

// Loads `params` (a directory of per-variable files, or one combined file)
// for `origin` and assigns the pserver program's share into `scope`, whose
// startup program has run. Returns how many variables were set; an error
// names the variable whose saved shape does not fit.
absl::StatusOr<int> LoadPserverParams(Executor& exe, const std::string& params, const ProgramDesc& origin,
                                      const ProgramDesc& pserver, const std::vector<SplitParam>& split, Scope* scope);

}  // namespace oar::cli
