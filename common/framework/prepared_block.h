// PreparedBlock: one block of a program made ready to run many times — each
// op checked against its registry entry (defaults filled), its variables
// bound to Variables of a scope, its kernel resolved and cached per dtype.
// Built by Executor::Prepare; see executor.h.
//
// Thread-safety: externally synchronized, with one exception: RunOpAt may
// run ops that share no variable from several threads at once (the
// ParallelExecutor's scheduler does, when its threads outnumber its places),
// so the sub-blocks those ops run (RunBlock) are prepared and run under
// locks of their own: each sub-block is prepared once, and runs once at a
// time (its variables are bound per run).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_desc.h"
#include "common/framework/scope.h"

namespace oar {

// Ops a runner put before and after the program's own in the block it
// prepares (the executors' feed and fetch ops), so errors number each of
// the program's ops as the program (and `oar inspect`) does.
struct OpsAdded {
  size_t front = 0;
  size_t back = 0;
};

class PreparedBlock : public BlockRunner {
 public:
  // Copies `program`, checks every op of block `block_id` against `registry`.
  // InvalidArgument/NotFound naming the block, op index and type.
  // `env` (may be null) is what the ops see as ExecutionContext::env(); it
  // must outlive the block.
  static absl::StatusOr<std::unique_ptr<PreparedBlock>> Create(const ProgramDesc& program, int block_id,
                                                               const OpRegistry& registry, Place place,
                                                               const RunEnv* env = nullptr, OpsAdded added = {});

  // Creates the block's variables — persistable ones in `scope`, the rest in
  // `local` (a descendant of `scope`, or `scope` itself) — and binds every op
  // argument to its Variable. Cheap to call again with the same scopes.
  absl::Status Bind(Scope* scope, Scope* local);
  // Forgets the binding; call before the bound local scope is destroyed or
  // variables are erased from the bound scopes.
  void Unbind() { bound_scope_ = bound_local_ = nullptr; }
  // Runs the bound ops in order; stops at the first failing op.
  absl::Status Run();
  // Runs only op `i` (bound); errors carry the op's location. For
  // schedulers that order ops themselves (ParallelExecutor).
  absl::Status RunOpAt(size_t i);
  size_t NumOps() const { return ops_.size(); }
  const OpDesc& Op(size_t i) const { return *ops_[i].desc; }

  // BlockRunner: runs a sub-block of this program (prepared on first use).
  // InvalidArgument when block `idx` is this one or one that runs it.
  absl::Status RunBlock(int32_t idx, Scope* scope) override;
  bool IsRunning(int32_t idx) const override;

  const ProgramDesc& program() const override { return *program_; }
  const BlockDesc& block() const { return program_->Block(block_id_); }
  int block_id() const { return block_id_; }

 private:
  // A variable bound both as an input and an output of one op.
  struct InPlaceArg {
    Variable* var;
    const std::string* in_slot;
    const std::string* out_slot;
    const std::string* name;
  };
  struct OpRuntime {
    const OpDesc* desc;
    const OpInfo* info;
    OpBinding binding;
    std::vector<InPlaceArg> in_place;
    // Outputs whose VarDesc declares a 0-D tensor (shape []: Paddle 2.x's
    // mean, reductions over all axes, losses). Fluid's shape rules give
    // them [1]; they are made [] after inference, as the program says.
    absl::InlinedVector<Variable*, 1> zero_d_outputs;
    KernelFn kernel = nullptr;
    DataType kernel_dtype = DataType::kFloat32;
    // Where the kernel runs: the block's place, or the CPU for a host-side
    // op in a GPU block (OpInfo::ChooseKernel).
    Place kernel_place;
  };

  PreparedBlock(std::unique_ptr<ProgramDesc> program, int block_id, Place place, const OpRegistry* registry,
                const RunEnv* env)
      : program_(std::move(program)), block_id_(block_id), place_(place), registry_(registry), env_(env) {}
  absl::Status CheckInputsSet(const OpRuntime& op) const;
  absl::Status InferShape(OpRuntime& op, RuntimeInferShapeContext* ictx) const;
  // RunOpBody, timed into env_->profiler when there is one.
  absl::Status RunOp(OpRuntime& op);
  absl::Status RunOpBody(OpRuntime& op);
  absl::Status RunOnHost(OpRuntime& op, DataType dtype, const absl::Status& why);
  // Where op `i` is, for its errors: "block 0, op #7" numbered as in the
  // program, or "block 0, the feed of 'x'" for an op a runner added.
  std::string Where(size_t i) const;

  std::unique_ptr<ProgramDesc> program_;
  int block_id_;
  Place place_;
  const OpRegistry* registry_;
  const RunEnv* env_;
  std::vector<OpRuntime> ops_;
  OpsAdded added_;
  Scope* bound_scope_ = nullptr;
  Scope* bound_local_ = nullptr;
  // A sub-block this block's ops run, prepared on first use; `mu` is held
  // while it is prepared, bound and run.
  struct SubBlock {
    absl::Mutex mu;
    std::unique_ptr<PreparedBlock> block ABSL_GUARDED_BY(mu);
  };
  absl::Mutex sub_blocks_mu_;  // held only to find or add an entry
  std::map<int32_t, std::unique_ptr<SubBlock>> sub_blocks_ ABSL_GUARDED_BY(sub_blocks_mu_);
  const PreparedBlock* parent_ = nullptr;  // the block whose op runs this one; set once, before it runs
};

}  // namespace oar
