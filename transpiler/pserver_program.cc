// The pserver program of one endpoint (Fluid's get_pserver_program):
// block 0 = variables + listen_and_serv; then the LR-decay block with copies
// of its sub-blocks; then one optimize block per parameter block owned here,
// each a child of the block before them, so listen_and_serv runs the LR
// block first and the optimize blocks in parallel.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "transpiler/distributed_table.h"
#include "transpiler/optimizer_shapes.h"
#include "transpiler/program_edit.h"
#include "transpiler/slice_variable.h"
#include "transpiler/transpile_state.h"

namespace oar {
namespace {

bool IsOptimizerOp(const OpDesc& op) { return op.inputs.count("Param") && op.inputs.count("LearningRate"); }

// One parameter block this pserver owns.
struct Owned {
  const SplitParam* sp;
  size_t block;
  std::string param;   // the pserver's name for it: "fc_w.block1" or "fc_w"
  std::string merged;  // its merged gradient: "fc_w@GRAD.block1" or "fc_w@GRAD"
};

class PserverBuilder {
 public:
  PserverBuilder(const TranspileState& s, const std::string& ep) : s_(s), ep_(ep) {}

  absl::StatusOr<ProgramDesc> Build() {
    DeclareReceivedVars();
    BuildLrBlock();
    const int32_t parent = static_cast<int32_t>(prog_.NumBlocks() - 1);
    for (const OpDesc& op : s_.optimize_ops) {
      if (!IsOptimizerOp(op)) continue;
      const std::string target = op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr, {""})[0];
      auto it = std::find_if(owned_.begin(), owned_.end(), [&](const Owned& o) { return o.sp->param == target; });
      if (it != owned_.end()) OAR_RETURN_IF_ERROR(BuildOptimizeBlock(*it, parent));
    }
    if (s_.table) {
      OAR_RETURN_IF_ERROR(BuildTableBlocks(s_, ep_, parent, &prog_, &table_));
      optimize_blocks_.push_back(table_.optimize_block);
      grad_to_block_id_.push_back(table_.grad_to_block_id);
    }
    if (optimize_blocks_.empty()) {  // a pserver that owns nothing still serves
      optimize_blocks_.push_back(prog_.AppendBlock(static_cast<int32_t>(prog_.NumBlocks() - 1))->idx());
    }
    OAR_RETURN_IF_ERROR(CheckEveryInputIsComputed());
    AppendListenAndServ();
    return std::move(prog_);
  }

 private:
  BlockDesc* global() { return prog_.MutableBlock(0); }

  void DeclareReceivedVars() {
    const bool per_trainer = s_.sync && s_.trainers > 1;
    for (const auto& sp : s_.split) {
      for (size_t b = 0; b < sp.param_blocks.size(); ++b) {
        if (sp.endpoints[b] != ep_) continue;
        const bool sliced = sp.param_blocks.size() > 1;
        Owned o{&sp, b, sp.param_blocks[b].name, sliced ? BlockName(sp.grad, static_cast<int64_t>(b)) : sp.grad};
        VarDesc p = sp.param_blocks[b];
        p.persistable = true;
        CloneVar(global(), p);
        VarDesc g = sp.grad_blocks[b];
        g.name = o.merged;
        g.persistable = true;
        CloneVar(global(), g);
        if (per_trainer) {
          for (int t = 0; t < s_.trainers; ++t) {
            VarDesc c = g;
            c.name = TrainerVarName(o.merged, t);
            c.persistable = false;
            CloneVar(global(), c);
            recv_inputs_.push_back(c.name);
          }
        } else {
          recv_inputs_.push_back(o.merged);
        }
        remap_[sp.param] = o.param;
        remap_[sp.grad] = o.merged;
        owned_.push_back(o);
      }
    }
  }

  // The pserver's name for `name`, declaring it in block 0 (or `local`,
  // for a sub-block's own variables) as the origin program declares it.
  std::string MapVar(const std::string& name, const BlockDesc& origin_block, BlockDesc* local = nullptr) {
    auto it = remap_.find(name);
    if (it != remap_.end()) return it->second;
    if (global()->HasVar(name)) return name;
    const VarDesc* v = origin_block.FindVarRecursive(name);
    if (v == nullptr) return name;  // reported by CheckEveryInputIsComputed
    const bool is_global = s_.origin.Block(0).FindVar(name) != nullptr;
    CloneVar(is_global || local == nullptr ? global() : local, *v);
    return name;
  }

  OpDesc CloneOp(const OpDesc& op, const BlockDesc& origin_block, BlockDesc* local = nullptr) {
    OpDesc out = op;
    for (auto* slots : {&out.inputs, &out.outputs}) {
      for (auto& [slot, args] : *slots) {
        for (auto& a : args) a = MapVar(a, origin_block, local);
      }
    }
    return out;
  }

  void CloneSubBlock(OpDesc* op, int32_t parent) {
    if (!op->HasAttr("sub_block")) return;
    const BlockDesc& origin_sub = s_.origin.Block(static_cast<size_t>(op->GetAttr<BlockRef>("sub_block").idx));
    BlockDesc* sub = prog_.AppendBlock(parent);
    for (const auto& [name, v] : origin_sub.vars()) CloneVar(sub, v);
    for (size_t i = 0; i < origin_sub.OpSize(); ++i) {
      OpDesc* cloned = sub->AppendOp();
      *cloned = CloneOp(origin_sub.Op(i), origin_sub, sub);
      const auto outs = cloned->OutputArgNames();
      lr_outputs_.insert(outs.begin(), outs.end());
      CloneSubBlock(cloned, sub->idx());
    }
    op->SetAttr("sub_block", BlockRef{sub->idx()});
  }

  void BuildLrBlock() {
    if (s_.lr_ops.empty()) return;
    BlockDesc* lr = prog_.AppendBlock(static_cast<int32_t>(prog_.NumBlocks() - 1));
    lr_block_ = lr->idx();
    optimize_blocks_.push_back(lr_block_);
    for (const OpDesc& op : s_.lr_ops) {
      OpDesc* cloned = lr->AppendOp();
      *cloned = CloneOp(op, s_.origin.Block(0));
      const auto outs = cloned->OutputArgNames();
      lr_outputs_.insert(outs.begin(), outs.end());
      CloneSubBlock(cloned, lr->idx());
    }
  }

  absl::Status BuildOptimizeBlock(const Owned& o, int32_t parent) {
    BlockDesc* block = prog_.AppendBlock(parent);
    optimize_blocks_.push_back(block->idx());
    const std::string entry = absl::StrCat(o.merged, ":", block->idx());
    if (std::find(grad_to_block_id_.begin(), grad_to_block_id_.end(), entry) == grad_to_block_id_.end()) {
      grad_to_block_id_.push_back(entry);
    }
    if (s_.sync && s_.trainers > 1) {  // merge the trainers' gradients first
      std::vector<std::string> copies;
      for (int t = 0; t < s_.trainers; ++t) copies.push_back(TrainerVarName(o.merged, t));
      *block->AppendOp() = MakeOp("sum", {{"X", copies}}, {{"Out", {o.merged}}}, {{"use_mkldnn", false}});
      *block->AppendOp() = MakeOp("scale", {{"X", {o.merged}}}, {{"Out", {o.merged}}},
                                  {{"scale", 1.0f / static_cast<float>(s_.trainers)}});
    }
    for (const OpDesc& op : s_.optimize_ops) {
      const auto role_var = op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
      if (role_var.empty() || role_var[0] != o.sp->param) continue;
      if (IsOptimizerOp(op)) {
        OAR_RETURN_IF_ERROR(AppendOptimizer(block, op, o));
      } else {  // clip, regularization, Adam's beta powers (never an LR op: those are not optimize ops)
        *block->AppendOp() = CloneOp(op, s_.origin.Block(0));
      }
    }
    return absl::OkStatus();
  }

  absl::Status AppendOptimizer(BlockDesc* block, const OpDesc& op, const Owned& o) {
    OAR_RETURN_IF_ERROR(CheckPserverOptimizer(op.type));
    OpDesc out = op;
    const VarDesc& param_block = o.sp->param_blocks[o.block];
    for (auto& [slot, args] : out.inputs) {
      for (auto& a : args) {
        if (slot == "Param") {
          a = o.param;
        } else if (slot == "Grad") {
          // Fluid always feeds the merged gradient here, which drops a
          // clip that writes a new variable; ours reads what the clip and
          // regularization ops before it in this block computed.
          a = (a != o.sp->grad && global()->HasVar(a)) ? a : o.merged;
        } else if (slot == "LearningRate") {
          a = MapVar(a, s_.origin.Block(0));
        } else {
          const VarDesc* v = s_.OriginVar(a);
          if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(op.type, ": no variable '", a, "'"));
          VarDesc acc = *v;
          acc.shape = OptimizerInputShape(op.type, slot, v->shape, param_block.shape);
          CloneVar(global(), acc);
        }
      }
    }
    for (auto& [slot, args] : out.outputs) {
      for (auto& a : args) a = slot == "ParamOut" ? o.param : MapVar(a, s_.origin.Block(0));
    }
    *block->AppendOp() = out;
    return absl::OkStatus();
  }

  // A cross-parameter op (e.g. GradientClipByGlobalNorm's norm) reads what
  // another pserver computes; Fluid builds such a program and fails at run
  // time, we refuse it here.
  absl::Status CheckEveryInputIsComputed() {
    std::set<std::string> ready(lr_outputs_.begin(), lr_outputs_.end());
    ready.insert(recv_inputs_.begin(), recv_inputs_.end());
    for (const auto& [name, v] : prog_.Block(0).vars()) {
      if (v.persistable) ready.insert(name);
    }
    for (int32_t id : optimize_blocks_) {
      if (id == lr_block_ || id == table_.optimize_block) continue;  // the table's reads what trainers send
      const BlockDesc& b = prog_.Block(static_cast<size_t>(id));
      std::set<std::string> local = ready;
      for (size_t i = 0; i < b.OpSize(); ++i) {
        for (const auto& n : b.Op(i).InputArgNames()) {
          if (local.count(n)) continue;
          return absl::InvalidArgumentError(
              absl::StrCat("pserver ", ep_, ": op '", b.Op(i).type, "' in optimize block ", id, " reads '", n,
                           "', which nothing on this pserver computes; ops that combine several parameters' gradients ",
                           "(such as GradientClipByGlobalNorm) cannot run in pserver mode"));
        }
        for (const auto& n : b.Op(i).OutputArgNames()) local.insert(n);
      }
    }
    return absl::OkStatus();
  }

  void AppendListenAndServ() {
    std::vector<std::string> sparse_grad_to_param;
    for (const auto& o : owned_) {
      if (o.sp->grad_blocks[o.block].type == paddle::framework::proto::VarType::SELECTED_ROWS) {
        sparse_grad_to_param.push_back(absl::StrCat(o.merged, ":", o.param));
      }
    }
    const auto pos = std::find(s_.pservers.begin(), s_.pservers.end(), ep_) - s_.pservers.begin();
    const int32_t kRpcThreads = 12;  // Fluid's ServerRuntimeConfig defaults
    OpDesc* ls = global()->AppendOp();
    *ls = MakeOp("listen_and_serv", {{"X", recv_inputs_}}, {},
                 {{"optimize_blocks", BlockRefs{optimize_blocks_}},
                  {"endpoint", ep_},
                  {"pserver_id", static_cast<int32_t>(pos)},
                  {"Fanin", int32_t{s_.trainers}},
                  {"distributed_mode", int32_t{s_.sync ? 0 : 1}},
                  {"sync_mode", s_.sync},  // Fluid ≤ 1.5's name for the mode
                  {"grad_to_block_id", grad_to_block_id_},
                  {"sparse_grad_to_param", sparse_grad_to_param},
                  {"lr_decay_block_id", int32_t{lr_block_}},
                  {"rpc_get_thread_num", kRpcThreads},
                  {"rpc_send_thread_num", kRpcThreads},
                  {"rpc_prefetch_thread_num", kRpcThreads}});
    if (s_.table) {
      ls->SetAttr("prefetch_var_name_to_block_id", table_.prefetch_var_name_to_block_id);
      ls->SetAttr("checkpint_block_id", int32_t{table_.checkpoint_block});  // Fluid's spelling
    }
  }

  const TranspileState& s_;
  const std::string ep_;
  ProgramDesc prog_;
  std::vector<Owned> owned_;
  std::map<std::string, std::string> remap_;  // origin param/grad → this pserver's block
  std::vector<std::string> recv_inputs_;
  std::vector<int32_t> optimize_blocks_;
  std::vector<std::string> grad_to_block_id_;
  std::set<std::string> lr_outputs_;
  int32_t lr_block_ = -1;
  TableBlocks table_;  // the distributed lookup table's, when there is one
};

}  // namespace

absl::StatusOr<ProgramDesc> BuildPserverProgram(const TranspileState& state, const std::string& endpoint) {
  if (std::find(state.pservers.begin(), state.pservers.end(), endpoint) == state.pservers.end()) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint '", endpoint, "' is not one of the pservers (",
                                                   absl::StrJoin(state.pservers, ","), ")"));
  }
  return PserverBuilder(state, endpoint).Build();
}

}  // namespace oar
