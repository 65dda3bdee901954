// The trainer side of pserver mode (Fluid's transpile() steps 1–4 and
// _get_trainer_startup_program), plus get_trainer_program's removal of the
// optimizer.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "transpiler/distributed_table.h"
#include "transpiler/optimize_pass.h"
#include "transpiler/program_edit.h"
#include "transpiler/remote_prefetch.h"
#include "transpiler/slice_variable.h"
#include "transpiler/transpile_state.h"

namespace oar {
namespace {

constexpr OpRole kRPC = OpRole::kRPC;
constexpr OpRole kDist = OpRole::kDist;

std::vector<std::string> Names(const std::vector<VarDesc>& vars) {
  std::vector<std::string> out;
  for (const auto& v : vars) out.push_back(v.name);
  return out;
}

std::vector<int32_t> Rows(const std::vector<VarDesc>& vars) {
  std::vector<int32_t> out;
  for (const auto& v : vars) out.push_back(static_cast<int32_t>(v.shape.empty() ? 0 : v.shape[0]));
  return out;
}

bool SlicedVar(const SplitParam& sp) { return sp.param_blocks.size() > 1; }

// The trainer's name for the gradient it sends: the renamed gradient when
// it is not sliced, the origin name when it is.
std::string SentGradName(const SplitParam& sp) { return SlicedVar(sp) ? sp.grad : sp.grad_blocks[0].name; }

absl::Status CheckShape(const VarDesc* v, const std::string& name, const char* what) {
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' is not a variable of block 0"));
  for (int64_t d : v->shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", name, "' has unknown dims; pserver mode slices only ", "fully known shapes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Cuts every (param, grad) pair into blocks and names them as Fluid does.
absl::Status SliceAndName(TranspileState* s, const std::vector<std::pair<std::string, std::string>>& params_grads) {
  std::vector<VarShape> params, grads;
  for (const auto& [p, g] : params_grads) {
    const VarDesc* pv = s->OriginVar(p);
    const VarDesc* gv = s->OriginVar(g);
    OAR_RETURN_IF_ERROR(CheckShape(pv, p, "parameter"));
    OAR_RETURN_IF_ERROR(CheckShape(gv, g, "gradient"));
    if (!pv->trainable) continue;  // Fluid skips parameters marked not trainable
    if (pv->shape != gv->shape) {
      return absl::InvalidArgumentError(absl::StrCat("gradient '", g, "' has shape [", absl::StrJoin(gv->shape, ","),
                                                     "] but its parameter '", p, "' has [",
                                                     absl::StrJoin(pv->shape, ","), "]"));
    }
    params.push_back({p, pv->shape});
    grads.push_back({g, gv->shape});
  }
  const int64_t count = s->config.slice_var_up ? static_cast<int64_t>(s->pservers.size()) : 1;
  const auto param_blocks = SliceVariable(params, count, s->config.min_block_size);
  const auto grad_blocks = SliceVariable(grads, count, s->config.min_block_size);
  const bool suffix = s->sync && s->trainers > 1;
  BlockDesc* main = s->program->MutableBlock(0);
  size_t at = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    SplitParam sp;
    sp.param = params[k].name;
    sp.grad = grads[k].name;
    const VarDesc& pv = *s->OriginVar(sp.param);
    const VarDesc& gv = *s->OriginVar(sp.grad);
    std::vector<int64_t> sizes;
    for (; at < param_blocks.size() && param_blocks[at].varname == sp.param; ++at) {
      sizes.push_back(param_blocks[at].size);
    }
    if (sizes.size() == 1) {
      sp.param_blocks.push_back(pv);
      VarDesc g = gv;
      if (suffix) {
        g.name = TrainerVarName(sp.grad, s->trainer_id);
        RenameVarInBlock(main, sp.grad, g.name);
      }
      sp.grad_blocks.push_back(g);
    } else {
      for (size_t b = 0; b < sizes.size(); ++b) {
        VarDesc p = pv, g = gv;
        p.name = BlockName(sp.param, static_cast<int64_t>(b));
        g.name = BlockName(sp.grad, static_cast<int64_t>(b));
        if (suffix) g.name = TrainerVarName(g.name, s->trainer_id);
        p.shape = g.shape = BlockShape(pv.shape, sizes[b]);
        p.persistable = g.persistable = false;
        p.is_parameter = false;
        *main->Var(p.name) = p;
        *main->Var(g.name) = g;
        sp.param_blocks.push_back(p);
        sp.grad_blocks.push_back(g);
      }
    }
    s->split.push_back(std::move(sp));
  }
  // Block i of a parameter and of its gradient live on the same pserver.
  std::vector<std::string> names;
  for (const auto& sp : s->split) {
    for (const auto& b : sp.param_blocks) names.push_back(b.name);
  }
  auto dispatcher = s->config.MakeDispatcher(s->pservers);
  const auto eps = dispatcher->Dispatch(names);
  size_t e = 0;
  for (auto& sp : s->split) {
    for (size_t b = 0; b < sp.param_blocks.size(); ++b) sp.endpoints.push_back(eps[e++]);
  }
  return absl::OkStatus();
}

namespace {

absl::Status InsertSends(TranspileState* s) {
  BlockDesc* main = s->program->MutableBlock(0);
  const bool runtime_split = s->config.runtime_split_send_recv;
  for (auto& sp : s->split) {
    const std::string sent = SentGradName(sp);
    int64_t index = FindLastWriter(*main, sent);
    if (index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no op in block 0 computes gradient '", sent, "' of parameter '", sp.param, "'"));
    }
    const bool sparse = sp.grad_blocks[0].type == paddle::framework::proto::VarType::SELECTED_ROWS;
    // Runtime split (Fluid 1.6+): no split op; the send op cuts the
    // gradient by the blocks' rows when it runs, a sparse one by row ranges.
    if (SlicedVar(sp) && sparse && !runtime_split) {
      const auto rows = Rows(sp.grad_blocks);
      *main->InsertOp(static_cast<size_t>(index + 1)) =
          MakeOp("split_selected_rows", {{"X", {sp.grad}}}, {{"Out", Names(sp.grad_blocks)}},
                 {{"height_sections", std::vector<int64_t>(rows.begin(), rows.end())}}, kDist);
      ++index;
    } else if (SlicedVar(sp) && !runtime_split) {
      *main->InsertOp(static_cast<size_t>(index + 1)) =
          MakeOp("split_byref", {{"X", {sp.grad}}}, {{"Out", Names(sp.grad_blocks)}},
                 {{"sections", Rows(sp.grad_blocks)}}, kDist);
      ++index;
    }
    sp.send_out = s->NewControlVar(main);
    std::map<std::string, Attribute> attrs = {
        {"epmap", sp.endpoints},
        {"sections", runtime_split ? Rows(sp.grad_blocks) : std::vector<int32_t>{}},
        {"send_varnames", runtime_split ? Names(sp.grad_blocks) : std::vector<std::string>{}},
        // Fluid's send finds the trainer id in a process-wide client; ours
        // carries it, since the pserver counts barriers per trainer.
        {"trainer_id", int32_t{s->trainer_id}},
        {kOpRoleVarAttr, std::vector<std::string>{sp.param, sent}},
        // Fluid 1.x's flag: in sync training a send does not wait for its
        // calls (send_barrier does), in async training it does.
        {"sync_mode", !s->sync},
    };
    const std::vector<std::string> x = runtime_split ? std::vector<std::string>{sent} : Names(sp.grad_blocks);
    *main->InsertOp(static_cast<size_t>(index + 1)) = MakeOp("send", {{"X", x}}, {{"Out", {sp.send_out}}}, attrs, kRPC);
  }
  return absl::OkStatus();
}

void AppendRecvs(TranspileState* s) {
  BlockDesc* main = s->program->MutableBlock(0);
  const bool runtime_split = s->config.runtime_split_send_recv;
  const int32_t tid = s->trainer_id;
  std::string barrier_out;
  if (s->sync) {
    std::vector<std::string> deps;
    for (const auto& sp : s->split) deps.push_back(sp.send_out);
    if (s->table) deps.push_back(s->table->send_out);
    barrier_out = s->NewControlVar(main);
    *main->AppendOp() = MakeOp("send_barrier", {{"X", deps}}, {{"Out", {barrier_out}}},
                               {{"endpoints", s->pservers}, {"trainer_id", tid}, {"half_async", false}}, kRPC);
  }
  if (!s->sync && s->config.half_async) {  // Fluid 1.7+: the trainer's threads meet in its communicator
    std::vector<std::string> deps;
    for (const auto& sp : s->split) deps.push_back(sp.send_out);
    if (s->table) deps.push_back(s->table->send_out);
    *main->AppendOp() = MakeOp("send_barrier", {{"X", deps}}, {{"Out", {s->NewControlVar(main)}}},
                               {{"endpoints", s->pservers}, {"trainer_id", tid}, {"half_async", true}}, kRPC);
  }
  std::vector<std::string> all_recv;
  for (const auto& sp : s->split) {
    if (sp.remote_prefetch) continue;  // its lookups read their rows from the pservers
    const std::vector<std::string> out = runtime_split ? std::vector<std::string>{sp.param} : Names(sp.param_blocks);
    all_recv.insert(all_recv.end(), out.begin(), out.end());
    std::map<std::string, Attribute> attrs = {
        {"epmap", sp.endpoints}, {"recv_varnames", runtime_split ? Names(sp.param_blocks) : std::vector<std::string>{}},
        {"trainer_id", tid},     {kOpRoleVarAttr, std::vector<std::string>{sp.param, SentGradName(sp)}},
        {"sync_mode", !s->sync},  // as send's: fetch_barrier waits for the recvs in sync training
    };
    *main->AppendOp() = MakeOp("recv", {{"X", {s->sync ? barrier_out : sp.send_out}}}, {{"Out", out}}, attrs, kRPC);
  }
  if (s->sync) {
    *main->AppendOp() = MakeOp("fetch_barrier", {{"X", {barrier_out}}}, {{"Out", all_recv}},
                               {{"endpoints", s->pservers}, {"trainer_id", tid}}, kRPC);
  }
  if (runtime_split) return;
  for (const auto& sp : s->split) {
    if (!SlicedVar(sp) || sp.remote_prefetch) continue;
    *main->AppendOp() =
        MakeOp("concat", {{"X", Names(sp.param_blocks)}}, {{"Out", {sp.param}}}, {{"axis", int32_t{0}}}, kDist);
  }
}

// Every trainer starts from the pservers' values: pull each parameter.
void AppendTrainerStartup(TranspileState* s) {
  BlockDesc* startup = s->startup->MutableBlock(0);
  const int32_t tid = s->trainer_id;
  for (const auto& sp : s->split) {
    for (const auto& b : sp.param_blocks) {
      if (startup->HasVar(b.name)) continue;
      VarDesc v = b;
      v.persistable = false;
      *startup->Var(b.name) = v;
    }
    *startup->AppendOp() = MakeOp("recv", {{"X", {}}}, {{"Out", Names(sp.param_blocks)}},
                                  {{"epmap", sp.endpoints}, {"trainer_id", tid}}, kRPC);
  }
  const std::string out = s->NewControlVar(startup);
  *startup->AppendOp() =
      MakeOp("fetch_barrier", {}, {{"Out", {out}}}, {{"endpoints", s->pservers}, {"trainer_id", tid}}, kRPC);
  for (const auto& sp : s->split) {
    if (!SlicedVar(sp)) continue;
    if (!startup->HasVar(sp.param)) *startup->Var(sp.param) = *s->OriginVar(sp.param);
    *startup->AppendOp() =
        MakeOp("concat", {{"X", Names(sp.param_blocks)}}, {{"Out", {sp.param}}}, {{"axis", int32_t{0}}});
  }
}

// The distributed table lives on the pservers: a trainer's startup does not
// draw it (every trainer would allocate the whole table) but marks its
// shape with fake_init, appended where the initializer was removed, as
// Fluid 1.6's transpiler does.
void FakeInitTable(TranspileState* s) {
  BlockDesc* startup = s->startup->MutableBlock(0);
  const std::string& table = s->table->name;
  std::vector<int64_t> shape;
  for (size_t i = startup->OpSize(); i-- > 0;) {
    const auto outs = startup->Op(i).OutputArgNames();
    if (std::find(outs.begin(), outs.end(), table) == outs.end()) continue;
    if (startup->Op(i).HasAttr("shape")) shape = startup->Op(i).GetAttr<std::vector<int64_t>>("shape");
    startup->RemoveOps(i, i + 1);
  }
  if (shape.empty() && s->OriginVar(table) != nullptr) shape = s->OriginVar(table)->shape;
  *startup->AppendOp() = MakeOp("fake_init", {}, {{"Out", {table}}}, {{"shape", shape}});
}

}  // namespace

std::string TranspileState::NewControlVar(BlockDesc* block) {
  std::string name;
  do {
    name = absl::StrCat("__control_var@", control_vars++);
  } while (block->HasVar(name));
  block->Var(name);
  return name;
}

absl::Status TranspileTrainer(TranspileState* s) {
  const BlockDesc& origin = s->origin.Block(0);
  const OptimizePass pass = FindOptimizePass(origin);
  if (pass.params_grads.empty()) {
    return absl::InvalidArgumentError(
        "the program has no optimize ops with op_role_var (call an optimizer's minimize before transpiling)");
  }
  for (size_t i : pass.optimize_ops) {
    // paddle.nn.ClipGradByGlobalNorm (a squared_l2_norm per gradient, summed)
    // scales every gradient by the norm of them all, which no pserver sees:
    // each would clip its own share by its own norm. Refused, never silently
    // changed.
    if (origin.Op(i).type == "squared_l2_norm") {
      return absl::UnimplementedError(absl::StrCat(
          "op #", i,
          " squared_l2_norm: the program clips gradients by their global norm (ClipGradByGlobalNorm), "
          "which in pserver mode would clip each pserver's share by its own norm; clip by each parameter's norm "
          "(ClipGradByNorm) or by value (ClipGradByValue), or train it in nccl2 mode"));
    }
    s->optimize_ops.push_back(origin.Op(i));
    s->to_delete.push_back(&s->program->Block(0).Op(i));
  }
  for (size_t i : pass.lr_ops) {
    s->lr_ops.push_back(origin.Op(i));
    s->to_delete.push_back(&s->program->Block(0).Op(i));
  }
  OAR_RETURN_IF_ERROR(FindDistributedTable(s));
  std::vector<std::pair<std::string, std::string>> params_grads;  // the table is not sliced: it is prefetched
  for (const auto& pg : pass.params_grads) {
    if (!s->table || pg.first != s->table->name) params_grads.push_back(pg);
  }
  OAR_RETURN_IF_ERROR(SliceAndName(s, params_grads));
  OAR_RETURN_IF_ERROR(InsertSends(s));
  DeclareTableSendOut(s);
  MarkRemotePrefetchTables(s);
  AppendRecvs(s);
  OAR_RETURN_IF_ERROR(TranspileTableTrainer(s));
  if (s->startup != nullptr) AppendTrainerStartup(s);
  if (s->startup != nullptr && s->table) FakeInitTable(s);
  return absl::OkStatus();
}

void StripOptimizer(TranspileState* s) {
  // Variables only the optimizer reads (accumulators, the learning rate):
  // inputs of optimize ops that no op_role_var names (Fluid 1.8's rule).
  std::set<std::string> inputs, role_vars;
  for (const auto& op : s->optimize_ops) {
    for (const auto& n : op.InputArgNames()) inputs.insert(n);
    for (const auto& n : op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr)) role_vars.insert(n);
  }
  BlockDesc* main = s->program->MutableBlock(0);
  for (size_t i = main->OpSize(); i-- > 0;) {
    if (std::find(s->to_delete.begin(), s->to_delete.end(), &main->Op(i)) != s->to_delete.end()) {
      main->RemoveOps(i, i + 1);
    }
  }
  std::set<std::string> still_used;
  for (size_t i = 0; i < main->OpSize(); ++i) {
    for (const auto& n : main->Op(i).InputArgNames()) still_used.insert(n);
    for (const auto& n : main->Op(i).OutputArgNames()) still_used.insert(n);
  }
  std::vector<std::string> drop;
  for (const auto& n : inputs) {
    if (!role_vars.count(n) && !still_used.count(n)) drop.push_back(n);
  }
  for (const auto& n : drop) main->RemoveVar(n);
  if (s->startup == nullptr) return;
  BlockDesc* startup = s->startup->MutableBlock(0);
  for (size_t i = startup->OpSize(); i-- > 0;) {
    const auto outs = startup->Op(i).OutputArgNames();
    const bool inits_dropped = std::any_of(outs.begin(), outs.end(), [&](const std::string& n) {
      return std::find(drop.begin(), drop.end(), n) != drop.end();
    });
    if (inits_dropped) startup->RemoveOps(i, i + 1);
  }
  for (const auto& n : drop) startup->RemoveVar(n);
}

}  // namespace oar
