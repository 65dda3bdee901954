#include "common/framework/op_registry.h"

#include <algorithm>
#include <set>

#include "absl/synchronization/mutex.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/framework/place_transfer.h"
#include "glog/logging.h"

namespace oar {

OpInfo::OpInfo(std::string type) : type_(std::move(type)) {
  // Every op carries Fluid's role attributes.
  attrs_[kOpRoleAttr] = int32_t{0};
  attrs_[kOpRoleVarAttr] = std::vector<std::string>{};
}

namespace {
SlotSpec MakeSlot(const std::string& name, int flags) {
  const bool unimplemented = (flags & kUnimplemented) != 0;
  return {name, (flags & kDuplicable) != 0, (flags & kDispensable) != 0 || unimplemented, !unimplemented,
          (flags & kReadAnywhere) != 0};
}
}  // namespace

OpInfo& OpInfo::Input(const std::string& name, int flags) {
  inputs_.push_back(MakeSlot(name, flags));
  return *this;
}

OpInfo& OpInfo::Output(const std::string& name, int flags) {
  outputs_.push_back(MakeSlot(name, flags));
  return *this;
}

OpInfo& OpInfo::Implements(const std::string& name, std::vector<Attribute> values) {
  CHECK(attrs_.count(name)) << type_ << ": Implements(" << name << ") before Attr(" << name << ")";
  implemented_values_[name] = std::move(values);
  return *this;
}

OpInfo& OpInfo::Attr(const std::string& name, Attribute default_value) {
  attrs_[name] = std::move(default_value);
  return *this;
}

OpInfo& OpInfo::AddKernel(Place::Kind place, DataType dtype, KernelFn fn) {
  kernels_[{static_cast<int>(place), static_cast<int>(dtype)}] = fn;
  return *this;
}

namespace {
absl::Status CheckSlots(const std::string& type, const char* what, const std::vector<SlotSpec>& spec,
                        const OpDesc::VarMap& got) {
  for (const auto& [slot, args] : got) {
    const std::string& name = slot;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(spec.begin(), spec.end(), [&](const SlotSpec& s) { return s.name == name; });
    // A slot with no variable in it is not given, whatever its name: later
    // Fluid and Paddle releases write their new optional slots empty
    // (AxisTensor, SectionsTensorList, StartsTensorList ...) on every op.
    const bool unbound =
        std::all_of(args.begin(), args.end(), [](const std::string& a) { return a.empty() || a == kEmptyVarName; });
    if (it == spec.end() && unbound) continue;
    if (it == spec.end()) {
      std::vector<std::string> names;
      for (const auto& s : spec) names.push_back(s.name);
      return absl::UnimplementedError(absl::StrCat(type, ": ", what, " slot '", slot, "' is bound to '",
                                                   absl::StrJoin(args, ", "), "', and Oar's ", type,
                                                   " has no such slot (it reads: ", absl::StrJoin(names, ", "), ")"));
    }
    if (!it->duplicable && args.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, ": ", what, " slot '", slot, "' takes one variable, got ", args.size()));
    }
    if (!it->implemented) {
      for (const std::string& arg : args) {
        if (arg.empty() || arg == kEmptyVarName) continue;
        return absl::UnimplementedError(absl::StrCat(type, ": ", what, " slot '", slot, "' is bound to '", arg,
                                                     "', which Oar's ", type,
                                                     " does not implement (it must be empty)"));
      }
    }
  }
  for (const auto& s : spec) {
    if (s.dispensable) continue;
    auto it = got.find(s.name);
    if (it == got.end() || it->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(type, ": missing required ", what, " slot '", s.name, "'"));
    }
    // A kernel writes every argument of a required output; @EMPTY@ binds to
    // no variable. (A required input named @EMPTY@ is reported at run time
    // as having no value.)
    if (std::string(what) != "output") continue;
    for (size_t i = 0; i < it->second.size(); ++i) {
      if (it->second[i] == kEmptyVarName) {
        return absl::InvalidArgumentError(absl::StrCat(type, ": required output slot '", s.name, "' has ",
                                                       kEmptyVarName, " (argument ", i, "); name a variable"));
      }
    }
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status OpInfo::CheckAndFill(OpDesc* op) const {
  OAR_RETURN_IF_ERROR(CheckSlots(type_, "input", inputs_, op->inputs));
  OAR_RETURN_IF_ERROR(CheckSlots(type_, "output", outputs_, op->outputs));
  if (not_in_place_) {
    for (const auto& [out_slot, outs] : op->outputs) {
      for (const std::string& out : outs) {
        if (out.empty() || out == kEmptyVarName) continue;
        for (const auto& [in_slot, ins] : op->inputs) {
          if (std::find(ins.begin(), ins.end(), out) == ins.end()) continue;
          return absl::InvalidArgumentError(absl::StrCat(
              type_, ": output ", out_slot, " ('", out, "') is also input ", in_slot, "; ", type_,
              " cannot run in place (its kernel would overwrite input it has yet to read): give the output its "
              "own variable"));
        }
      }
    }
  }
  for (const auto& [name, def] : attrs_) {
    auto it = op->attrs.find(name);
    if (it == op->attrs.end()) {
      op->attrs[name] = def;
    } else if (!CoerceAttribute(def.index(), &it->second)) {
      return absl::InvalidArgumentError(absl::StrCat(type_, ": attribute '", name, "' should be ",
                                                     AttrTypeName(def.index()), ", got ",
                                                     AttrTypeName(it->second.index())));
    }
  }
  for (const auto& [name, values] : implemented_values_) {
    const Attribute& v = op->attrs.at(name);
    if (std::find(values.begin(), values.end(), v) != values.end()) continue;
    std::vector<std::string> ok;
    for (const Attribute& a : values) ok.push_back(AttributeToString(a));
    return absl::UnimplementedError(absl::StrCat(type_, ": attribute ", name, "=", AttributeToString(v),
                                                 " is not implemented (Oar implements ", name, "=",
                                                 absl::StrJoin(ok, " or "), ")"));
  }
  return absl::OkStatus();
}

bool OpInfo::HasKernelFor(Place::Kind place) const {
  for (const auto& [key, fn] : kernels_) {
    if (key.first == static_cast<int>(place)) return true;
  }
  return false;
}

absl::StatusOr<KernelFn> OpInfo::FindKernel(Place::Kind place, DataType dtype) const {
  auto it = kernels_.find({static_cast<int>(place), static_cast<int>(dtype)});
  if (it != kernels_.end()) return it->second;
  std::vector<std::string> have;
  for (const auto& [key, fn] : kernels_) {
    if (key.first == static_cast<int>(place)) have.push_back(DataTypeName(static_cast<DataType>(key.second)));
  }
  return absl::NotFoundError(
      absl::StrCat(type_, ": no kernel for ", DataTypeName(dtype), " on ", Place{place, 0}.ToString(),
                   " (kernels exist for: ", have.empty() ? "none" : absl::StrJoin(have, ", "), ")"));
}

absl::StatusOr<std::pair<KernelFn, Place>> OpInfo::ChooseKernel(const Place& place, DataType dtype) const {
  auto own = FindKernel(place.kind, dtype);
  if (own.ok()) return std::make_pair(*own, place);
  if (!place.is_gpu()) return own.status();
  if (host_side_) {
    OAR_ASSIGN_OR_RETURN(KernelFn cpu, FindKernel(Place::Kind::kCPU, dtype));
    return std::make_pair(cpu, CPUPlace());
  }
  // No GPU kernel for this dtype: its CPU kernel runs on the host, the
  // inputs copied there and the outputs read back from there by the next
  // GPU op, as Paddle's ChooseKernel falls back. Said once per op and dtype:
  // it is correct but slow.
  if (auto cpu = FindKernel(Place::Kind::kCPU, dtype); cpu.ok()) {
    SayRunsOnHostOnce(absl::StrCat(type_, " ", DataTypeName(dtype)),
                      absl::StrCat(type_, ": no GPU kernel for ", DataTypeName(dtype), " (", place.ToString(),
                                   "'s inputs are copied to the host and back)"));
    return std::make_pair(*cpu, CPUPlace());
  }
  std::vector<std::string> gpu, cpu;
  for (const auto& [key, fn] : kernels_) {
    auto& list = key.first == static_cast<int>(Place::Kind::kCUDA) ? gpu : cpu;
    if (key.first != static_cast<int>(Place::Kind::kCUDAPinned))
      list.push_back(DataTypeName(static_cast<DataType>(key.second)));
  }
  return absl::NotFoundError(absl::StrCat(type_, ": no GPU kernel for ", DataTypeName(dtype), " (on ", place.ToString(),
                                          "; GPU kernels: ", gpu.empty() ? "none" : absl::StrJoin(gpu, ", "),
                                          "; CPU kernels: ", cpu.empty() ? "none" : absl::StrJoin(cpu, ", "),
                                          "). Run this program on the CPU (--device cpu), or add the op's kernel"));
}
DataType OpInfo::KernelDtype(const ExecutionContext& ctx) const {
  if (kernel_dtype_ != nullptr) return kernel_dtype_(ctx);
  const Tensor* first = nullptr;
  for (const auto& slot : inputs_) {
    for (size_t i = 0, n = ctx.InputSize(slot.name); i < n; ++i) {
      const Variable* v = ctx.InputVar(slot.name, i);
      const Tensor* t = nullptr;
      if (v != nullptr && v->IsType<Tensor>()) t = &v->Get<Tensor>();
      if (v != nullptr && v->IsType<SelectedRows>()) t = &v->Get<SelectedRows>().value;
      if (t == nullptr || !t->initialized()) continue;
      if (IsFloating(t->dtype())) return t->dtype();
      if (first == nullptr) first = t;
    }
  }
  if (ctx.op().HasAttr("dtype")) {
    return static_cast<DataType>(ctx.Attr<int32_t>("dtype"));
  }
  return first ? first->dtype() : DataType::kFloat32;
}

// ---- registry ----

OpInfo& OpRegistry::Register(const std::string& type) {
  auto& slot = ops_[type];
  CHECK(slot == nullptr) << "op type '" << type << "' registered twice";
  slot = std::make_unique<OpInfo>(type);
  return *slot;
}

OpInfo& OpRegistry::Extend(const std::string& type) {
  auto it = ops_.find(type);
  CHECK(it != ops_.end()) << "Extend('" << type << "'): the op is not registered";
  return *it->second;
}

const OpInfo* OpRegistry::Find(absl::string_view type) const {
  auto it = ops_.find(type);
  return it == ops_.end() ? nullptr : it->second.get();
}

absl::StatusOr<const OpInfo*> OpRegistry::Get(absl::string_view type) const {
  if (const OpInfo* info = Find(type)) return info;
  return absl::NotFoundError(absl::StrCat("unknown op type '", type, "'"));
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : ops_) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

// ---- grad helpers ----

OpDesc MakeGradOp(const OpDesc& fwd, const std::string& type, const std::vector<std::string>& fwd_inputs,
                  const std::vector<std::string>& fwd_outputs, const std::vector<std::string>& out_grads,
                  const std::vector<std::string>& in_grads) {
  OpDesc g;
  g.type = type;
  auto grads_of = [](const std::vector<std::string>& args) {
    std::vector<std::string> out;
    for (const auto& a : args) out.push_back(GradVarName(a));
    return out;
  };
  for (const auto& s : fwd_inputs)
    if (fwd.inputs.count(s)) g.SetInput(s, fwd.Input(s));
  for (const auto& s : fwd_outputs)
    if (fwd.outputs.count(s)) g.SetInput(s, fwd.Output(s));
  for (const auto& s : out_grads) {
    if (fwd.outputs.count(s)) g.SetInput(GradVarName(s), grads_of(fwd.Output(s)));
  }
  for (const auto& s : in_grads) {
    if (fwd.inputs.count(s)) g.SetOutput(GradVarName(s), grads_of(fwd.Input(s)));
  }
  g.attrs = fwd.attrs;
  return g;
}

GradMakerFn GradOpMaker(std::vector<std::string> fwd_inputs, std::vector<std::string> fwd_outputs,
                        std::vector<std::string> out_grads, std::vector<std::string> in_grads) {
  return [=](const OpDesc& fwd) {
    return std::vector<OpDesc>{MakeGradOp(fwd, fwd.type + "_grad", fwd_inputs, fwd_outputs, out_grads, in_grads)};
  };
}

}  // namespace oar
