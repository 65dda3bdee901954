// Test helpers for ops: run op descs directly over a scope, make tensors,
// and check an op's gradient kernels against central differences of its
// forward kernel (the numeric gradient check every grad op must pass).
//
// Thread-safety: test-only, single-threaded.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_desc.h"
#include "common/framework/scope.h"

namespace oar::testing {

// Runs `ops` in order over `scope` (inputs set beforehand), with the same
// checks and shape inference the Executor applies.
absl::Status RunOps(const std::vector<OpDesc>& ops, Scope* scope);
// As RunOps, on `place` (inputs move there as the Executor moves them); waits
// for the place's stream before returning.
absl::Status RunOpsOn(const std::vector<OpDesc>& ops, Scope* scope, const Place& place);

// An op desc from slot maps and attributes.
OpDesc MakeOp(const std::string& type, OpDesc::VarMap inputs, OpDesc::VarMap outputs,
              std::map<std::string, Attribute> attrs = {});

void SetTensor(Scope* scope, const std::string& name, const Tensor& t);
const Tensor& GetTensor(const Scope& scope, const std::string& name);
// A variable's value as a dense tensor (SelectedRows are densified).
template <typename T>
Tensor GetDense(const Scope& scope, const std::string& name);

// Uniform values in [lo, hi) from a fixed seed.
template <typename T>
Tensor RandomTensor(const DDim& dims, double lo, double hi, uint64_t seed);

struct GradCheckOptions {
  double eps = 1e-6;        // central-difference step
  double tolerance = 1e-6;  // max |analytic - numeric| / max(1, |numeric|)
  // Output variables whose weighted sum is the loss; empty: every floating
  // output of the op.
  std::vector<std::string> loss_outputs;
};

// For each input variable in `check`, compares d(loss)/d(input) from the op's
// grad ops with central differences, where loss = Σ w·out over the loss
// outputs with fixed random weights w. Adds a gtest failure per mismatch.
// T is the dtype the op runs in (inputs must already be of that dtype).
template <typename T>
void ExpectGradientsMatch(const OpDesc& op, const std::map<std::string, Tensor>& inputs,
                          const std::vector<std::string>& check, GradCheckOptions options = {});

}  // namespace oar::testing
