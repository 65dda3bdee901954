// LayerHelper, after Fluid's: what every layer does — name itself
// ("fc_0"), create temporaries ("fc_0.tmp_0") and parameters ("fc_0.w_0",
// declared in both programs and initialized in startup), and append ops that
// are checked against the op registry and shape-inferred at build time.
//
// Thread-safety: externally synchronized; uses the calling thread's current
// programs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/api/param_attr.h"
#include "common/api/program.h"
#include "common/framework/op_registry.h"

namespace oar {

using VarList = std::map<std::string, std::vector<Var>>;

class LayerHelper {
 public:
  // `name` empty: unique_name::Generate(layer_type).
  explicit LayerHelper(const std::string& layer_type, const std::string& name = "");

  const std::string& name() const { return name_; }
  Program* main() const { return main_; }
  Program* startup() const { return startup_; }
  // The block ops and temporaries go to (a sub-block inside control flow).
  BlockDesc* block() const { return main_->current_block(); }

  // True when every Var is valid and the program has no error yet.
  bool Ok(std::initializer_list<Var> vars) const;
  // Records an InvalidArgument "<layer>: ..." in the main program.
  void Fail(const std::string& message) const;

  // A new temporary "<name>.tmp_N" of `dtype`.
  Var CreateTmp(DataType dtype, bool stop_gradient = false) const;
  // A persistable variable in the main program's global block.
  Var CreateGlobal(const std::string& name, DataType dtype, const std::vector<int64_t>& shape) const;
  // A parameter; returns an invalid Var when attr.disabled.
  Var CreateParameter(const ParamAttr& attr, const std::vector<int64_t>& shape, DataType dtype, bool is_bias,
                      InitializerPtr default_initializer = nullptr) const;
  // Declares `var` in the startup program and appends `init` to fill it.
  void InitInStartup(const VarDesc& var, const InitializerPtr& init) const;

  // Appends an op to the main program's global block, stamped with the
  // current op role; checks it and infers output shapes. On error records it
  // and returns nullptr.
  OpDesc* AppendOp(const std::string& type, const VarList& inputs, const VarList& outputs,
                   std::map<std::string, Attribute> attrs = {}) const;

  // elementwise_add of a bias over dims [dim_start, dim_end) (dim_end -1:
  // the rank); returns `x` as is when `attr` is disabled.
  Var AppendBias(const Var& x, int dim_start, const ParamAttr& attr, int dim_end = -1) const;
  // Applies activation `act` ("" = none).
  Var AppendActivation(const Var& x, const std::string& act) const;

 private:
  std::string name_;
  Program* main_;
  Program* startup_;
};

// Checks `op` against `registry` (filling defaults) and infers its outputs'
// shapes into `block`. Used by LayerHelper and by backward.
absl::Status CheckAndInferOp(const OpRegistry& registry, OpDesc* op, BlockDesc* block);

}  // namespace oar
