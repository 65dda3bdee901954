// In-memory programs: VarDesc, OpDesc, BlockDesc and ProgramDesc mirror the
// messages of proto/framework.proto and convert to and from them losslessly,
// so that Fluid's program files load and ours load in Fluid.
//
//   ProgramDesc prog;
//   BlockDesc* b = prog.MutableBlock(0);
//   b->Var("x")->shape = {-1, 784};
//   OpDesc* op = b->AppendOp();
//   op->type = "relu"; op->SetInput("X", {"x"}); op->SetOutput("Out", {"y"});
//   std::string bytes = prog.Serialize();
//
// Every mutating accessor of ProgramDesc and BlockDesc bumps the program's
// version(), which run-time caches compare to notice edits.
//
// Thread-safety: externally synchronized.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/attribute.h"
#include "common/framework/data_type.h"
#include "proto/framework.pb.h"

namespace oar {

using VarKind = paddle::framework::proto::VarType::Type;

// Fluid's reserved names.
inline constexpr char kGradSuffix[] = "@GRAD";
inline constexpr char kEmptyVarName[] = "@EMPTY@";
inline constexpr char kFeedVarName[] = "feed";
inline constexpr char kFetchVarName[] = "fetch";
inline std::string GradVarName(absl::string_view name) { return std::string(name) + kGradSuffix; }

// Fluid's op_role attribute values (a bit set) and attribute names.
enum class OpRole : int32_t {
  kForward = 0,
  kBackward = 1,
  kOptimize = 2,
  kRPC = 4,
  kDist = 8,
  kLRSched = 16,
  kLoss = 256,
};
inline constexpr char kOpRoleAttr[] = "op_role";
inline constexpr char kOpRoleVarAttr[] = "op_role_var";

struct VarDesc {
  std::string name;
  VarKind type = paddle::framework::proto::VarType::LOD_TENSOR;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  int32_t lod_level = 0;
  bool persistable = false;
  bool need_check_feed = false;
  // Build-time properties (Fluid keeps them on the Python side only; they are
  // not serialized).
  bool stop_gradient = false;
  bool is_parameter = false;
  bool trainable = true;
  float learning_rate = 1.0f;  // per-parameter multiplier of the optimizer's rate
};

class OpDesc {
 public:
  using VarMap = std::map<std::string, std::vector<std::string>>;

  std::string type;
  VarMap inputs;  // slot → argument names, sorted by slot as Fluid writes
  VarMap outputs;
  std::map<std::string, Attribute> attrs;

  // The arguments of a slot; empty when the slot is absent.
  const std::vector<std::string>& Input(const std::string& slot) const;
  const std::vector<std::string>& Output(const std::string& slot) const;
  void SetInput(const std::string& slot, std::vector<std::string> args) { inputs[slot] = std::move(args); }
  void SetOutput(const std::string& slot, std::vector<std::string> args) { outputs[slot] = std::move(args); }
  std::vector<std::string> InputArgNames() const;
  std::vector<std::string> OutputArgNames() const;
  void RenameInput(const std::string& from, const std::string& to);
  void RenameOutput(const std::string& from, const std::string& to);

  bool HasAttr(const std::string& name) const { return attrs.count(name) > 0; }
  void SetAttr(const std::string& name, Attribute value) { attrs[name] = std::move(value); }
  // The attribute as T, or `fallback` when absent or of another type.
  template <typename T>
  T GetAttr(const std::string& name, T fallback = T{}) const {
    auto it = attrs.find(name);
    if (it == attrs.end()) return fallback;
    const T* v = std::get_if<T>(&it->second);
    return v ? *v : fallback;
  }
  int32_t role() const { return GetAttr<int32_t>(kOpRoleAttr, 0); }

  // "mul(X=[x], Y=[w]) -> (Out=[t]) {x_num_col_dims=1}"
  std::string ToString() const;
  void ToProto(paddle::framework::proto::OpDesc* out) const;
  static absl::StatusOr<OpDesc> FromProto(const paddle::framework::proto::OpDesc& in);
};

class ProgramDesc;

class BlockDesc {
 public:
  int32_t idx() const { return idx_; }
  int32_t parent_idx() const { return parent_idx_; }
  int32_t forward_block_idx() const { return forward_block_idx_; }
  void set_forward_block_idx(int32_t i);

  // Finds or creates `name` in this block.
  VarDesc* Var(const std::string& name);
  // This block only; nullptr when absent.
  const VarDesc* FindVar(const std::string& name) const;
  VarDesc* FindMutableVar(const std::string& name);
  // This block, then its ancestors; nullptr when absent.
  const VarDesc* FindVarRecursive(const std::string& name) const;
  VarDesc* FindMutableVarRecursive(const std::string& name);
  bool HasVar(const std::string& name) const { return vars_.count(name) > 0; }
  void RemoveVar(const std::string& name);
  const std::map<std::string, VarDesc>& vars() const { return vars_; }

  size_t OpSize() const { return ops_.size(); }
  const OpDesc& Op(size_t i) const { return *ops_[i]; }
  OpDesc* MutableOp(size_t i);
  OpDesc* AppendOp();
  OpDesc* PrependOp();
  OpDesc* InsertOp(size_t index);
  void RemoveOps(size_t begin, size_t end);

  const ProgramDesc* program() const { return program_; }

 private:
  friend class ProgramDesc;
  BlockDesc(ProgramDesc* program, int32_t idx, int32_t parent_idx)
      : program_(program), idx_(idx), parent_idx_(parent_idx) {}

  ProgramDesc* program_;
  int32_t idx_;
  int32_t parent_idx_;
  int32_t forward_block_idx_ = -1;
  std::map<std::string, VarDesc> vars_;  // sorted: Fluid serializes in name order
  std::vector<std::unique_ptr<OpDesc>> ops_;
};

class ProgramDesc {
 public:
  // A program with one empty global block.
  ProgramDesc();
  ProgramDesc(const ProgramDesc& other);
  ProgramDesc& operator=(const ProgramDesc& other);

  // Parses serialized framework.proto bytes; InvalidArgument naming the
  // offending block, op or variable when they do not form a valid program.
  static absl::StatusOr<std::unique_ptr<ProgramDesc>> Parse(absl::string_view bytes);
  static absl::StatusOr<std::unique_ptr<ProgramDesc>> FromProto(const paddle::framework::proto::ProgramDesc& in);
  paddle::framework::proto::ProgramDesc ToProto() const;
  std::string Serialize() const;

  size_t NumBlocks() const { return blocks_.size(); }
  const BlockDesc& Block(size_t i) const { return *blocks_[i]; }
  BlockDesc* MutableBlock(size_t i);
  // Appends a block whose parent is `parent_idx`.
  BlockDesc* AppendBlock(int32_t parent_idx);

  // Identity of this object (never reused) and a counter of its edits; a
  // cache keyed on both notices any edit made through the accessors above.
  uint64_t id() const { return id_; }
  uint64_t version() const { return version_; }
  void BumpVersion() { ++version_; }

  // Multi-line listing of blocks, variables and ops (what `oar inspect` prints).
  std::string ToString() const;

 private:
  void CopyFrom(const ProgramDesc& other);

  uint64_t id_;
  uint64_t version_ = 0;
  int64_t format_version_ = 0;
  std::vector<std::unique_ptr<BlockDesc>> blocks_;
};

// "LOD_TENSOR", "FEED_MINIBATCH", ...
std::string VarKindName(VarKind kind);

}  // namespace oar
