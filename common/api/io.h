// fluid.io in C++: saving and loading variables with save/load(_combine)
// ops run by an Executor, inference models (`__model__` + parameters) and
// crash-safe checkpoints.
//
//   OAR_RETURN_IF_ERROR(save_persistables(exe, &scope, "/ckpt", main.desc()));
//   OAR_ASSIGN_OR_RETURN(InferenceModel m, load_inference_model("/model", exe, &scope));
//
// With `filename` empty every variable goes to dirname/<name>; otherwise all
// go to dirname/<filename> in name order (save_combine), as in Fluid.
//
// Thread-safety: externally synchronized (uses the Executor).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/executor.h"

namespace oar {

// Persistable variables of `program` that hold data (not feed/fetch lists).
std::vector<std::string> PersistableVarNames(const ProgramDesc& program);

absl::Status save_vars(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                       const std::vector<std::string>& vars, const std::string& filename = "");
absl::Status load_vars(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                       const std::vector<std::string>& vars, const std::string& filename = "");
absl::Status save_persistables(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                               const std::string& filename = "");
absl::Status load_persistables(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                               const std::string& filename = "");
// load_persistables from `path`: a directory of per-variable files, or one
// combined file (what `save_persistables` wrote with a filename).
absl::Status LoadPersistablesFrom(Executor& exe, Scope* scope, const std::string& path, const ProgramDesc& program);

// The forward part of `program` that computing `targets` from `feeds` needs:
// block-0 ops that targets depend on, backward and optimize ops dropped,
// is_test set, unused variables removed (a test program from a training one).
ProgramDesc PruneToTargets(const ProgramDesc& program, const std::vector<std::string>& feeds,
                           const std::vector<std::string>& targets);

// Prunes `program` to what computing `target_vars` from `feeded_var_names`
// needs (backward and optimize ops dropped, is_test set), adds feed/fetch
// ops, writes dirname/<model_filename or __model__> and the parameters.
absl::Status save_inference_model(const std::string& dirname, const std::vector<std::string>& feeded_var_names,
                                  const std::vector<std::string>& target_vars, Executor& exe, Scope* scope,
                                  const ProgramDesc& program, const std::string& model_filename = "",
                                  const std::string& params_filename = "");

struct InferenceModel {
  std::unique_ptr<ProgramDesc> program;  // feed/fetch ops removed: run with Executor::Run
  std::vector<std::string> feed_names;   // in feed-column order
  std::vector<std::string> fetch_names;
};
absl::StatusOr<InferenceModel> load_inference_model(const std::string& dirname, Executor& exe, Scope* scope,
                                                    const std::string& model_filename = "",
                                                    const std::string& params_filename = "");

// A checkpoint: save_persistables plus a manifest (variable, dtype, shape)
// written last and atomically, so an interrupted save never looks complete.
absl::Status save_checkpoint(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program);
// Loads a complete checkpoint (checkpoint_io.cc); FailedPrecondition when
// the manifest is missing, InvalidArgument — before anything is read — when
// the checkpoint lacks a variable of `program` (naming what it lacks and
// what it holds instead) or one's shape or dtype differs. What it holds
// that `program` does not declare is not loaded, and named in `*left_out`.
absl::Status load_checkpoint(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                             std::vector<std::string>* left_out = nullptr);

}  // namespace oar
