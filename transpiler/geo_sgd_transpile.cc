// GEO-SGD, as Fluid 1.6–1.8's GeoSgdTranspiler writes it (checked against
// Paddle 1.8.5's output):
//  - trainer: the program keeps its optimizer; each parameter (and each
//    block of a sliced one) gets a `.delta` variable (SelectedRows for a
//    sparse one); lookups read the local table (remote_prefetch off); one
//    send at the end carries the ids of the sparse tables' lookups
//    (send_varnames: the tables), which the GEO communicator counts as a
//    step and whose ids it remembers;
//  - trainer startup: its initializers, a recv of every dense parameter's
//    blocks, fetch_barrier, concat, and send(param_init) (the communicator
//    snapshots the parameters there);
//  - pserver: listen_and_serv (distributed_mode 3) whose optimize blocks are
//    each sum(X=[block, block.delta]) -> block.
// Distributed tables (is_distributed) are refused: Fluid 1.8's GEO keeps
// every table whole on each trainer.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "transpiler/optimize_pass.h"
#include "transpiler/program_edit.h"
#include "transpiler/transpile_state.h"

namespace oar {
namespace {

namespace proto = paddle::framework::proto;

bool IsLookup(const OpDesc& op) { return op.type == "lookup_table" || op.type == "lookup_table_v2"; }
bool Sparse(const SplitParam& sp) { return sp.grad_blocks[0].type == proto::VarType::SELECTED_ROWS; }
bool Sliced(const SplitParam& sp) { return sp.param_blocks.size() > 1; }
std::string DeltaName(const std::string& var) { return var + ".delta"; }

VarDesc DeltaOf(const VarDesc& v, bool sparse) {
  VarDesc d = v;
  d.name = DeltaName(v.name);
  d.persistable = false;
  d.is_parameter = false;
  if (sparse) d.type = proto::VarType::SELECTED_ROWS;
  return d;
}

std::vector<std::string> Names(const std::vector<VarDesc>& vars) {
  std::vector<std::string> out;
  for (const auto& v : vars) out.push_back(v.name);
  return out;
}

}  // namespace

absl::Status TranspileGeoTrainer(TranspileState* s) {
  const BlockDesc& origin = s->origin.Block(0);
  for (size_t i = 0; i < origin.OpSize(); ++i) {
    if (IsLookup(origin.Op(i)) && origin.Op(i).GetAttr<bool>("is_distributed", false)) {
      return absl::UnimplementedError(absl::StrCat(
          "geo_sgd_mode: the lookup of '", origin.Op(i).Input("W")[0],
          "' is distributed (is_distributed), and GEO-SGD keeps every table whole on each trainer (as Fluid 1.8's "
          "does); use is_sparse without is_distributed, or async training"));
    }
  }
  const OptimizePass pass = FindOptimizePass(origin);
  if (pass.params_grads.empty()) {
    return absl::InvalidArgumentError(
        "the program has no optimize ops with op_role_var (call an optimizer's minimize before transpiling)");
  }
  OAR_RETURN_IF_ERROR(SliceAndName(s, pass.params_grads));
  BlockDesc* main = s->program->MutableBlock(0);
  std::set<std::string> sparse_tables;
  for (const auto& sp : s->split) {
    const bool sparse = Sparse(sp);
    if (sparse) sparse_tables.insert(sp.param);
    *main->Var(DeltaName(sp.param)) = DeltaOf(*s->OriginVar(sp.param), sparse);
    if (!Sliced(sp)) continue;
    for (const auto& b : sp.param_blocks) *main->Var(DeltaName(b.name)) = DeltaOf(b, sparse);
  }
  std::vector<std::string> ids, tables;
  for (size_t i = 0; i < main->OpSize(); ++i) {
    OpDesc* op = main->MutableOp(i);
    if (!IsLookup(*op) || !sparse_tables.count(op->Input("W")[0])) continue;
    if (op->HasAttr("remote_prefetch")) op->SetAttr("remote_prefetch", false);
    ids.push_back(op->Input("Ids")[0]);
    tables.push_back(op->Input("W")[0]);
  }
  *main->AppendOp() = MakeOp("send", {{"X", ids}}, {},
                             {{"send_varnames", tables}, {"trainer_id", int32_t{s->trainer_id}}}, OpRole::kRPC);
  if (s->startup == nullptr) return absl::OkStatus();
  BlockDesc* startup = s->startup->MutableBlock(0);
  const int32_t tid = s->trainer_id;
  for (const auto& sp : s->split) {
    if (Sparse(sp)) continue;  // each trainer's own initializer, as Fluid's GEO leaves it
    for (const auto& b : sp.param_blocks) {
      if (startup->HasVar(b.name)) continue;
      VarDesc v = b;
      v.persistable = false;
      *startup->Var(b.name) = v;
    }
    *startup->AppendOp() = MakeOp("recv", {{"X", {}}}, {{"Out", Names(sp.param_blocks)}},
                                  {{"epmap", sp.endpoints}, {"trainer_id", tid}}, OpRole::kRPC);
  }
  *startup->AppendOp() = MakeOp("fetch_barrier", {}, {{"Out", {s->NewControlVar(startup)}}},
                                {{"endpoints", s->pservers}, {"trainer_id", tid}}, OpRole::kRPC);
  for (const auto& sp : s->split) {
    if (Sparse(sp) || !Sliced(sp)) continue;
    *startup->AppendOp() =
        MakeOp("concat", {{"X", Names(sp.param_blocks)}}, {{"Out", {sp.param}}}, {{"axis", int32_t{0}}});
  }
  VarDesc init;
  init.name = "param_init";
  *startup->Var(init.name) = init;
  *startup->AppendOp() =
      MakeOp("send", {{"X", {init.name}}}, {},
             {{"send_varnames", std::vector<std::string>{init.name}}, {"trainer_id", tid}}, OpRole::kRPC);
  return absl::OkStatus();
}

absl::StatusOr<ProgramDesc> BuildGeoPserverProgram(const TranspileState& s, const std::string& endpoint) {
  const auto pos = std::find(s.pservers.begin(), s.pservers.end(), endpoint) - s.pservers.begin();
  if (static_cast<size_t>(pos) == s.pservers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint '", endpoint, "' is not one of the pservers (", absl::StrJoin(s.pservers, ","), ")"));
  }
  ProgramDesc prog;
  BlockDesc* global = prog.MutableBlock(0);
  std::vector<int32_t> blocks;
  std::vector<std::string> grad_to_block_id, sparse_grad_to_param;
  for (const auto& sp : s.split) {
    for (size_t b = 0; b < sp.param_blocks.size(); ++b) {
      if (sp.endpoints[b] != endpoint) continue;
      VarDesc param = sp.param_blocks[b];
      param.persistable = true;
      *global->Var(param.name) = param;
      VarDesc delta = DeltaOf(param, Sparse(sp));
      *global->Var(delta.name) = delta;
      BlockDesc* block = prog.AppendBlock(static_cast<int32_t>(prog.NumBlocks() - 1));
      *block->AppendOp() =
          MakeOp("sum", {{"X", {param.name, delta.name}}}, {{"Out", {param.name}}}, {}, OpRole::kOptimize);
      blocks.push_back(block->idx());
      grad_to_block_id.push_back(absl::StrCat(delta.name, ":", block->idx()));
      if (Sparse(sp)) sparse_grad_to_param.push_back(absl::StrCat(delta.name, ":", param.name));
    }
  }
  const int32_t kRpcThreads = 12;  // Fluid's ServerRuntimeConfig defaults
  *global->AppendOp() = MakeOp("listen_and_serv", {{"X", {}}}, {},
                               {{"optimize_blocks", BlockRefs{blocks}},
                                {"endpoint", endpoint},
                                {"pserver_id", static_cast<int32_t>(pos)},
                                {"Fanin", int32_t{s.trainers}},
                                {"distributed_mode", int32_t{3}},
                                {"sync_mode", false},
                                {"grad_to_block_id", grad_to_block_id},
                                {"sparse_grad_to_param", sparse_grad_to_param},
                                {"lr_decay_block_id", int32_t{-1}},
                                {"rpc_get_thread_num", kRpcThreads},
                                {"rpc_send_thread_num", kRpcThreads},
                                {"rpc_prefetch_thread_num", kRpcThreads}});
  return prog;
}

}  // namespace oar
