// The op registry: for each op type, its input/output slots, attributes with
// defaults, shape inference, gradient-op maker and kernels per (place, dtype).
// Op libraries register explicitly (RegisterMathOps(&registry) ...); nothing
// registers from static initializers.
//
//   OpRegistry r;
//   r.Register("scale").Input("X").Output("Out").Attr("scale", 1.0f)
//       .SetInferShape(SameShapeAsX).Kernel<float>(ScaleKernel<float>);
//   const OpInfo* info = r.Find("scale");
//
// Thread-safety: registration is externally synchronized and happens before
// use; lookups on a fully built registry are safe for concurrent use.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/framework/attribute.h"
#include "common/framework/op_context.h"

namespace oar {

using InferShapeFn = absl::Status (*)(InferShapeContext& ctx);
using KernelFn = absl::Status (*)(const ExecutionContext& ctx);
// Returns the gradient ops for a forward op (argument names use @GRAD).
using GradMakerFn = std::function<std::vector<OpDesc>(const OpDesc& fwd)>;
// Picks the dtype whose kernel runs; the default takes the first floating
// input tensor, then a "dtype" attribute, then float32.
using KernelDtypeFn = DataType (*)(const ExecutionContext& ctx);
// Sets the variable kinds (LOD_TENSOR / SELECTED_ROWS) of an op's outputs at
// build time, e.g. a sparse embedding's W@GRAD is SELECTED_ROWS.
using InferVarTypeFn = void (*)(const OpDesc& op, BlockDesc* block);

struct SlotSpec {
  std::string name;
  bool duplicable = false;     // may hold several arguments
  bool dispensable = false;    // may be absent
  bool implemented = true;     // false: declared as Fluid declares it, but no kernel reads it
  bool read_anywhere = false;  // kReadAnywhere: the executor leaves it where it lies
};

// kUnimplemented: a dispensable slot that Fluid's OpMaker declares (so
// programs from later Fluid/Paddle versions name it, usually empty) but
// Oar's kernels do not read; a program that binds a variable to it is an
// error naming op and slot, never silently ignored.
//
// kReadAnywhere (inputs): every kernel of the op reads this input wherever
// it lies (host or GPU), so a GPU executor does not move it to the
// kernel's place first: ids a GPU kernel checks on the host anyway, a
// condition read on the host, a sub-block's inputs.
enum SlotFlags { kPlain = 0, kDuplicable = 1, kDispensable = 2, kUnimplemented = 4, kReadAnywhere = 8 };

class OpInfo {
 public:
  explicit OpInfo(std::string type);

  OpInfo& Input(const std::string& name, int flags = kPlain);
  OpInfo& Output(const std::string& name, int flags = kPlain);
  OpInfo& Attr(const std::string& name, Attribute default_value);
  // Attribute `name` (declared with Attr) may only take these values: the
  // kernels implement no others, and any other value would change the
  // maths. CheckAndFill refuses the rest, naming op, attribute and value.
  OpInfo& Implements(const std::string& name, std::vector<Attribute> values);
  OpInfo& SetInferShape(InferShapeFn fn) {
    infer_shape_ = fn;
    return *this;
  }
  OpInfo& SetGradMaker(GradMakerFn fn) {
    grad_maker_ = std::move(fn);
    return *this;
  }
  OpInfo& SetKernelDtype(KernelDtypeFn fn) {
    kernel_dtype_ = fn;
    return *this;
  }
  OpInfo& SetInferVarType(InferVarTypeFn fn) {
    infer_var_type_ = fn;
    return *this;
  }
  // For view ops (reshape2 ...): an output bound to the op's own input may
  // take a new shape with the same element count. Other ops bound in place
  // must keep the input's shape (PreparedBlock checks).
  OpInfo& InPlaceMayReshape() {
    in_place_may_reshape_ = true;
    return *this;
  }
  // An op whose kernels write output elements before reading the input
  // elements they overwrite (a GEMM, a permutation, a window, a zero-fill
  // first): an output bound to one of its inputs is an error naming both
  // (PreparedBlock), not wrong values. Fluid's inplace pass never binds them.
  OpInfo& NotInPlace() {
    not_in_place_ = true;
    return *this;
  }
  // A host-side op (feed/fetch, send/recv and the other RPC ops, file I/O,
  // the auc metric's host-kept histograms): on a GPU place it runs its CPU
  // kernel, its inputs copied to the host first. So does any other op on a
  // GPU place without a GPU kernel for the dtype, with a warning (Paddle's
  // fallback); without a CPU kernel either, it is an error naming the op.
  OpInfo& HostSide() {
    host_side_ = true;
    return *this;
  }
  OpInfo& AddKernel(Place::Kind place, DataType dtype, KernelFn fn);
  template <typename T>
  OpInfo& Kernel(KernelFn fn, Place::Kind place = Place::Kind::kCPU) {
    return AddKernel(place, DataTypeOf<T>::value, fn);
  }

  const std::string& type() const { return type_; }
  const std::vector<SlotSpec>& inputs() const { return inputs_; }
  const std::vector<SlotSpec>& outputs() const { return outputs_; }
  const std::map<std::string, Attribute>& attr_defaults() const { return attrs_; }
  InferShapeFn infer_shape() const { return infer_shape_; }
  InferVarTypeFn infer_var_type() const { return infer_var_type_; }
  const GradMakerFn& grad_maker() const { return grad_maker_; }
  bool HasGrad() const { return static_cast<bool>(grad_maker_); }
  bool in_place_may_reshape() const { return in_place_may_reshape_; }
  bool not_in_place() const { return not_in_place_; }
  bool host_side() const { return host_side_; }

  // Checks `op` against this spec (unknown slots, missing required slots,
  // @EMPTY@ in a required output slot, several arguments in a plain slot,
  // a variable in an unimplemented slot, attribute types, attribute values
  // outside Implements) and fills in
  // defaults for absent attributes. InvalidArgument naming the slot/attr.
  absl::Status CheckAndFill(OpDesc* op) const;
  // The kernel for (place, dtype); NotFound naming both, and the dtypes that
  // place has kernels for, when there is none.
  absl::StatusOr<KernelFn> FindKernel(Place::Kind place, DataType dtype) const;
  // Whether it has a kernel, of any dtype, for `place`.
  bool HasKernelFor(Place::Kind place) const;
  // The kernel an executor on `place` runs, and where it runs: the place's
  // own, else (host-side ops on a GPU place) the CPU's. NotFound "mul: no
  // GPU kernel for float64 (on CUDAPlace(0); ...)" otherwise.
  absl::StatusOr<std::pair<KernelFn, Place>> ChooseKernel(const Place& place, DataType dtype) const;
  DataType KernelDtype(const ExecutionContext& ctx) const;

 private:
  std::string type_;
  std::vector<SlotSpec> inputs_;
  std::vector<SlotSpec> outputs_;
  std::map<std::string, Attribute> attrs_;
  std::map<std::string, std::vector<Attribute>> implemented_values_;
  InferShapeFn infer_shape_ = nullptr;
  GradMakerFn grad_maker_;
  KernelDtypeFn kernel_dtype_ = nullptr;
  InferVarTypeFn infer_var_type_ = nullptr;
  bool in_place_may_reshape_ = false;
  bool not_in_place_ = false;
  bool host_side_ = false;
  std::map<std::pair<int, int>, KernelFn> kernels_;
};

class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // Adds a new op type; registering a type twice is a programming error
  // (logged fatally).
  OpInfo& Register(const std::string& type);
  // A registered op, to add kernels for another place to (the GPU kernels
  // register beside the CPU ones); logged fatally when absent.
  OpInfo& Extend(const std::string& type);
  // nullptr when `type` is not registered.
  const OpInfo* Find(absl::string_view type) const;
  // NotFound "unknown op type 'foo'" when absent.
  absl::StatusOr<const OpInfo*> Get(absl::string_view type) const;
  std::vector<std::string> Types() const;

  // The registry with every built-in op. Built on first use, then read-only.
  // Defined by the ops target (common/ops/register_all.cc), which a binary
  // links to run programs: the framework itself names no op.
  static const OpRegistry& Global();
  // Adds the ops of a runtime (the pserver's listen_and_serv, the trainer's
  // send/recv ops) to the global registry, once per `registrar`. Call at
  // start-up, before executors run on other threads.
  static void ExtendGlobal(void (*registrar)(OpRegistry*));

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<OpInfo>> ops_;
};

// ---- helpers for grad makers ----

// Builds a grad op of type `type` whose inputs are the forward op's slots
// `fwd_inputs` and `fwd_outputs` as they are, plus `S@GRAD` for each slot S in
// `out_grads`, and whose outputs are `S@GRAD` for each S in `in_grads`. All
// forward attributes are copied.
OpDesc MakeGradOp(const OpDesc& fwd, const std::string& type, const std::vector<std::string>& fwd_inputs,
                  const std::vector<std::string>& fwd_outputs, const std::vector<std::string>& out_grads,
                  const std::vector<std::string>& in_grads);

// A GradMakerFn producing one MakeGradOp(fwd, fwd.type + "_grad", ...).
GradMakerFn GradOpMaker(std::vector<std::string> fwd_inputs, std::vector<std::string> fwd_outputs,
                        std::vector<std::string> out_grads, std::vector<std::string> in_grads);

}  // namespace oar
