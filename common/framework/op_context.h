// The views an op sees while it is checked and run:
//   InferShapeContext — input shapes in, output shapes out; one implementation
//     over VarDescs (build time, shapes may hold -1) and one over run-time
//     Variables (all shapes known).
//   ExecutionContext — a kernel's view: bound input/output variables, attrs,
//     the place.
// Slots absent from the op, and arguments named @EMPTY@, read as missing.
//
// Thread-safety: both are short-lived and used by one thread at a time.
#pragma once

#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "common/device/place.h"
#include "common/framework/ddim.h"
#include "common/framework/program_desc.h"
#include "common/framework/run_env.h"
#include "common/framework/scope.h"

namespace oar {

// Run-time variables bound to an op's slots, in the order of OpDesc::inputs /
// outputs. A @EMPTY@ argument binds to nullptr.
struct BoundSlot {
  const std::string* name;
  std::vector<Variable*> vars;
  bool read_anywhere = false;  // the slot's SlotSpec::read_anywhere (inputs)
};
struct OpBinding {
  std::vector<BoundSlot> inputs;
  std::vector<BoundSlot> outputs;
};

class InferShapeContext {
 public:
  explicit InferShapeContext(const OpDesc& op) : op_(op) {}
  virtual ~InferShapeContext() = default;

  const OpDesc& op() const { return op_; }
  template <typename T>
  T Attr(const std::string& name) const {
    return op_.GetAttr<T>(name);
  }
  // True when the slot has at least one argument other than @EMPTY@.
  bool HasInput(const std::string& slot) const;
  bool HasOutput(const std::string& slot) const;
  size_t InputSize(const std::string& slot) const { return op_.Input(slot).size(); }
  size_t OutputSize(const std::string& slot) const { return op_.Output(slot).size(); }

  // Shape of the i-th argument of an input slot (empty DDim when missing).
  virtual DDim InputDim(const std::string& slot, size_t i = 0) const = 0;
  virtual DataType InputDtype(const std::string& slot, size_t i = 0) const = 0;
  // Sets the shape (build time: also the dtype) of an output argument; does
  // nothing for a missing one.
  virtual void SetOutputDim(const std::string& slot, const DDim& dims, size_t i = 0) = 0;
  virtual void SetOutputDtype(const std::string& slot, DataType dtype, size_t i = 0) = 0;
  // Copies the LoD of input `in` to output `out` (run time only).
  virtual void ShareLoD(const std::string& in, const std::string& out) = 0;
  virtual bool IsRuntime() const = 0;

  // InvalidArgument "<type>: <message>" — the error shape-inference returns.
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(op_.type, ": ", args...));
  }

 private:
  const OpDesc& op_;
};

// Build-time shape inference over a block's VarDescs.
class CompileTimeInferShapeContext : public InferShapeContext {
 public:
  CompileTimeInferShapeContext(const OpDesc& op, BlockDesc* block) : InferShapeContext(op), block_(block) {}
  DDim InputDim(const std::string& slot, size_t i) const override;
  DataType InputDtype(const std::string& slot, size_t i) const override;
  void SetOutputDim(const std::string& slot, const DDim& dims, size_t i) override;
  void SetOutputDtype(const std::string& slot, DataType dtype, size_t i) override;
  void ShareLoD(const std::string&, const std::string&) override {}
  bool IsRuntime() const override { return false; }

 private:
  const VarDesc* InVar(const std::string& slot, size_t i) const;
  BlockDesc* block_;
};

// Dense shapes inferred for outputs that hold a SelectedRows: a sparse
// kernel sizes such an output itself; a dense kernel that asks for it as a
// Tensor (ExecutionContext::Output) gets one of this shape.
using SparseOutputDims = absl::InlinedVector<std::pair<const Variable*, DDim>, 1>;

// Run-time shape inference over bound variables. Run-time shapes are never
// negative: SetOutputDim refuses one (leaving the output as it was) and
// status() reports it.
class RuntimeInferShapeContext : public InferShapeContext {
 public:
  RuntimeInferShapeContext(const OpDesc& op, const OpBinding& binding) : InferShapeContext(op), binding_(binding) {}
  DDim InputDim(const std::string& slot, size_t i) const override;
  DataType InputDtype(const std::string& slot, size_t i) const override;
  void SetOutputDim(const std::string& slot, const DDim& dims, size_t i) override;
  void SetOutputDtype(const std::string&, DataType, size_t) override {}
  void ShareLoD(const std::string& in, const std::string& out) override;
  bool IsRuntime() const override { return true; }

  // InvalidArgument "<op>: output Out ('o') has shape [-1, 3] ..." for the
  // first negative shape SetOutputDim was given; OK otherwise.
  const absl::Status& status() const { return status_; }
  const SparseOutputDims& sparse_output_dims() const { return sparse_output_dims_; }

 private:
  const OpBinding& binding_;
  absl::Status status_;
  SparseOutputDims sparse_output_dims_;
};

// Runs other blocks of the program an op belongs to (for control-flow ops
// such as conditional_block).
class BlockRunner {
 public:
  virtual ~BlockRunner() = default;
  // Runs block `idx` with its temporaries in `scope` (a child of the op's
  // scope); returns the first failing op's error.
  virtual absl::Status RunBlock(int32_t idx, Scope* scope) = 0;
  // True when block `idx` is running already (it is this runner's block or
  // one whose op runs it): running it again would never end.
  virtual bool IsRunning(int32_t) const { return false; }
  // The program the blocks belong to (ops that run blocks themselves, e.g.
  // listen_and_serv, prepare their own copies).
  virtual const ProgramDesc& program() const = 0;
};

class ExecutionContext {
 public:
  ExecutionContext(const OpDesc& op, const OpBinding& binding, const Place& place, Scope* scope = nullptr,
                   BlockRunner* runner = nullptr, const RunEnv* env = nullptr)
      : op_(op), binding_(binding), place_(place), scope_(scope), runner_(runner), env_(env) {}

  // The shapes run-time inference gave outputs that hold a SelectedRows
  // (see Output); not owned, must outlive this context.
  void set_sparse_output_dims(const SparseOutputDims* dims) { sparse_output_dims_ = dims; }

  const OpDesc& op() const { return op_; }
  const Place& place() const { return place_; }
  // The scope the op runs in and the runner for sub-blocks; null where the
  // caller runs single ops without an executor.
  Scope* scope() const { return scope_; }
  BlockRunner* runner() const { return runner_; }
  // The network objects of the runtime that runs the op; null where none
  // was given (ops that need one return FailedPrecondition).
  const RunEnv* env() const { return env_; }
  template <typename T>
  T Attr(const std::string& name) const {
    return op_.GetAttr<T>(name);
  }

  // The i-th variable of a slot; nullptr when the slot or argument is missing.
  Variable* InputVar(const std::string& slot, size_t i = 0) const;
  Variable* OutputVar(const std::string& slot, size_t i = 0) const;
  size_t InputSize(const std::string& slot) const;
  // The i-th input as a dense tensor; nullptr when missing or not a tensor.
  const Tensor* Input(const std::string& slot, size_t i = 0) const;
  std::vector<const Tensor*> MultiInput(const std::string& slot) const;
  // The i-th output as a dense tensor (made one if it held something else:
  // a SelectedRows becomes a tensor of the shape inference gave it); nullptr
  // when the argument is missing or @EMPTY@.
  Tensor* Output(const std::string& slot, size_t i = 0) const;
  std::vector<Tensor*> MultiOutput(const std::string& slot) const;

 private:
  const OpDesc& op_;
  const OpBinding& binding_;
  const Place& place_;
  Scope* scope_;
  BlockRunner* runner_;
  const RunEnv* env_;
  const SparseOutputDims* sparse_output_dims_ = nullptr;

  Tensor* AsDenseOutput(Variable* v) const;
};

// The bound variables of `slot` in `slots`, or nullptr when absent.
const std::vector<Variable*>* FindBoundSlot(const std::vector<BoundSlot>& slots, const std::string& slot);

}  // namespace oar
