// Evaluating a program file on test data (`oar train --program` at its end,
// and trainer 0 of an `oar run`/`oar launch` job): the program pruned to
// its loss and --fetch targets (backward and optimizer dropped, is_test
// set) runs over every batch of a FeedSource; each target, a float scalar,
// is averaged over the examples.
//
// Thread-safety: runs on the calling thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/data_feed_desc.h"
#include "common/data/feed_source.h"
#include "common/framework/executor.h"

namespace oar::cli {

// A fetched loss or metric as a number: a float scalar (one element).
absl::StatusOr<double> ScalarOf(const Tensor& t, const std::string& name);

// test_program over `source` in `scope`: each of `targets` averaged over the
// examples, in order.
absl::StatusOr<std::vector<double>> EvaluateProgram(Executor& exe, const ProgramDesc& test_program, Scope* scope,
                                                    FeedSource* source, const std::vector<std::string>& targets);

// The used slots of a DataFeedDesc: the variables its MultiSlot files feed.
std::vector<std::string> UsedSlotNames(const DataFeedDesc& feed);

// test_program over MultiSlot files (`patterns`, --test_files), in batches
// of the desc's size, each used slot checked against `main`'s variable.
absl::StatusOr<std::vector<double>> EvaluateProgramOnFiles(Executor& exe, const ProgramDesc& test_program,
                                                           const ProgramDesc& main, Scope* scope,
                                                           const DataFeedDesc& feed, const std::string& patterns,
                                                           const std::vector<std::string>& targets);

// "test_loss=0.432 test_acc=0.9" (targets[0] is the loss), %.6g each.
std::string EvalLine(const std::vector<std::string>& targets, const std::vector<double>& values, char sep);

}  // namespace oar::cli
