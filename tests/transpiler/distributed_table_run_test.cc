// A transpiled job with a distributed lookup table, run in-process (each
// pserver and trainer an Executor on its own thread, gRPC on loopback),
// against the single-process program with a local table on the same
// batches: the losses agree within 1e-5 at every step, and so do the final
// dense parameters. The pservers' table rows are made on first use from the
// table's initializer; the reference's table is filled with the same rows.
// And checkpoint_notify saves each pserver's shard (and its accumulators),
// which a fresh pserver loads back row for row.
#include <filesystem>
#include <thread>

#include "absl/strings/str_join.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/sparse_table.h"
#include "gtest/gtest.h"
#include "pserver/pserver_ops.h"
#include "pserver/sparse_tables.h"
#include "tests/transpiler/table_net.h"
#include "tests/util/listen_socket.h"
#include "tests/util/serving_net.h"
#include "tests/util/trainer_net.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"
#include "transpiler/program_edit.h"

namespace oar {
namespace {

constexpr int kSteps = 8;
constexpr int kBatch = 16;

// Samples [begin, end) of step `step`'s batch.
FeedMap Batch(int step, int begin = 0, int end = kBatch) {
  std::vector<int64_t> a, b;
  std::vector<float> y;
  for (int i = begin; i < end; ++i) {
    a.push_back((i * 997 + step * 13) % kTableRows / (i % 4 == 0 ? 8 : 1));  // repeats within and across steps
    b.push_back((i * 31 + 7) % 64);
    y.push_back(std::cos(0.01f * static_cast<float>(a.back())) + 0.1f * static_cast<float>(i % 3));
  }
  const int64_t n = end - begin;
  return {{"ids", MakeTensor<int64_t>({n, 1}, a)},
          {"ids2", MakeTensor<int64_t>({n, 1}, b)},
          {"y", MakeTensor<float>({n, 1}, y)}};
}

// The rows a pserver makes for the table: its startup's initializer.
RowInitializer TableInitializer(const ProgramDesc& pserver_startup) {
  for (size_t i = 0; i < pserver_startup.Block(0).OpSize(); ++i) {
    const OpDesc& op = pserver_startup.Block(0).Op(i);
    if (op.type == "uniform_random" && op.Output("Out")[0] == "emb") {
      return {RowInitializer::Kind::kUniform, op.GetAttr<float>("min"), op.GetAttr<float>("max"),
              static_cast<uint32_t>(op.GetAttr<int32_t>("seed"))};
    }
  }
  ADD_FAILURE() << "no initializer of emb in the pserver startup";
  return {};
}

// Every row of table `name` in `scope`: id → values.
std::map<int64_t, std::vector<float>> TableRows(Scope* scope, const std::string& name) {
  std::map<int64_t, std::vector<float>> rows;
  const SparseTable& t = scope->FindVar(name)->Get<SparseTable>();
  const int64_t w = t.width();
  t.ForEach([&](int64_t id, const float* v) { rows[id].assign(v, v + w); });
  return rows;
}

// With `checkpoint_dir`, the trainer ends with checkpoint_notify, and each
// pserver's checkpoint, loaded into a fresh pserver scope, holds the rows of
// its table and of the table's accumulators that the pserver ended with.
//
// With several (sync) trainers, each trains on its share of every batch;
// Fluid sums the trainers' table gradients on the pservers (the dense ones
// are averaged), so the reference gives the table `trainers` times the rate.
void RunJob(const std::string& opt, int pservers, bool sync, const std::string& checkpoint_dir = "", int trainers = 1) {
  OpRegistry::ExtendGlobal(RegisterPserverOps);
  OpRegistry::ExtendGlobal(RegisterDistOps);
  constexpr int kDeadlineMs = 20000;  // every call and barrier of the job
  std::vector<std::string> eps;
  for (int p = 0; p < pservers; ++p) eps.push_back(ReservedEndpoint());
  std::string loss;
  std::vector<ProgramDesc> trainer(trainers), trainer_startup(trainers);
  std::vector<ProgramDesc> ps(pservers), ps_startup(pservers);
  for (int k = 0; k < trainers; ++k) {  // every process transpiles the same model the same way
    TableNet net(opt);
    loss = net.loss.name();
    DistributeTranspiler t;
    ASSERT_TRUE(t.transpile(k, &net.main.desc(), absl::StrJoin(eps, ","), trainers, sync, &net.startup.desc()).ok());
    trainer[k] = *t.get_trainer_program(false);
    trainer_startup[k] = *t.get_trainer_startup_program();
    for (int p = 0; p < pservers && k == 0; ++p) std::tie(ps[p], ps_startup[p]) = *t.get_pserver_programs(eps[p]);
  }

  std::vector<absl::Status> ps_status(pservers);
  std::vector<Scope> ps_scope(pservers);
  std::vector<std::thread> threads;
  for (int p = 0; p < pservers; ++p) {
    threads.emplace_back([&, p] {
      ServingNet net(kDeadlineMs);
      Executor exe(CPUPlace(), net.options());
      Scope& scope = ps_scope[p];
      auto tables = PrepareSparseTables(ps[p], &scope);
      if (!tables.ok()) {
        ps_status[p] = tables.status();
        return;
      }
      auto s = exe.Run(ps_startup[p], &scope);
      ps_status[p] = s.ok() ? exe.Run(ps[p], &scope).status() : s.status();
    });
  }
  std::vector<absl::Status> trainer_status(trainers);
  std::vector<std::vector<float>> losses(trainers);
  std::map<std::string, std::vector<float>> initial, final;
  const int share = kBatch / trainers;
  for (int k = 0; k < trainers; ++k) {
    threads.emplace_back([&, k] {
      TrainerNet tn(nullptr, {.deadline_ms = kDeadlineMs});
      Executor exe(CPUPlace(), tn.options());
      Scope scope;
      absl::Status& status = trainer_status[k];
      status = tn.client.WaitServerReady(eps, kDeadlineMs);
      if (!status.ok()) return;
      auto st = exe.Run(trainer_startup[k], &scope);
      if (!st.ok()) {
        status = st.status();
        return;
      }
      if (k == 0) {
        for (const char* p : {"w", "b"}) initial[p] = TensorToVector<float>(scope.FindVar(p)->Get<Tensor>());
      }
      for (int s = 0; s < kSteps; ++s) {
        auto r = exe.Run(trainer[k], &scope, Batch(s, k * share, (k + 1) * share), {loss});
        if (!r.ok()) {
          status = r.status();
          return;
        }
        losses[k].push_back(TensorToVector<float>((*r)[0])[0]);
      }
      if (k == 0) {
        for (const char* p : {"w", "b"}) final[p] = TensorToVector<float>(scope.FindVar(p)->Get<Tensor>());
      }
      if (k == 0 && !checkpoint_dir.empty()) {
        ProgramDesc notify;
        *notify.MutableBlock(0)->AppendOp() =
            MakeOp("checkpoint_notify", {}, {}, {{"epmap", eps}, {"dir", checkpoint_dir}});
        status = exe.Run(notify, &scope).status();
        if (!status.ok()) return;
      }
      status = exe.Close();
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < trainers; ++k)
    ASSERT_TRUE(trainer_status[k].ok()) << "trainer " << k << ": " << trainer_status[k];
  for (int p = 0; p < pservers; ++p) ASSERT_TRUE(ps_status[p].ok()) << "pserver " << p << ": " << ps_status[p];
  for (int p = 0; p < pservers && !checkpoint_dir.empty(); ++p) {
    auto tables = PrepareSparseTables(ps[p], &ps_scope[p]);  // the names only: they exist already
    ASSERT_TRUE(tables.ok()) << tables.status();
    Scope fresh;
    ASSERT_TRUE(PrepareSparseTables(ps[p], &fresh).ok());
    Executor exe;
    ASSERT_TRUE(exe.Run(ps_startup[p], &fresh).ok());
    PserverConfig config = *ListenAndServConfig(ps[p].Block(0).Op(0));
    auto step = LoadPserverCheckpoint(exe, &fresh, PserverCheckpointDir(checkpoint_dir, p), ps[p], config);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(tables->size(), opt == "adagrad" ? 2u : 1u);
    for (const auto& name : *tables) {
      const auto want = TableRows(&ps_scope[p], name);
      EXPECT_FALSE(want.empty()) << name;
      EXPECT_EQ(TableRows(&fresh, name), want) << "pserver " << p << " table " << name;
    }
  }

  // The single process: a local table holding the rows the pservers made.
  TableNet ref(opt, /*distributed=*/false, /*table_lr=*/static_cast<float>(trainers));
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(ref.startup.desc(), &scope).ok());
  SparseTable rows;
  ASSERT_TRUE(rows.Configure(8).ok());
  rows.SetInitializer(TableInitializer(ps_startup[0]));
  Tensor* emb = scope.FindVar("emb")->GetMutable<Tensor>();
  ASSERT_EQ(emb->numel(), kTableRows * 8);
  std::vector<int64_t> all(kTableRows);
  for (int64_t i = 0; i < kTableRows; ++i) all[i] = i;
  rows.Lookup(all.data(), kTableRows, emb->data<float>());
  for (const auto& [name, values] : initial) {
    std::copy(values.begin(), values.end(), scope.FindVar(name)->GetMutable<Tensor>()->data<float>());
  }
  std::vector<float> want;
  for (int s = 0; s < kSteps; ++s) {
    auto r = exe.Run(ref.main.desc(), &scope, Batch(s), {ref.loss.name()});
    ASSERT_TRUE(r.ok()) << r.status();
    want.push_back(TensorToVector<float>((*r)[0])[0]);
    float mean = 0;
    for (int k = 0; k < trainers; ++k) mean += losses[k][s] / static_cast<float>(trainers);
    EXPECT_NEAR(mean, want.back(), 1e-5) << "step " << s;
  }
  EXPECT_LT(want.back(), 0.9f * want.front());  // it trains
  for (const auto& [name, got] : final) {
    const auto w = TensorToVector<float>(scope.FindVar(name)->Get<Tensor>());
    ASSERT_EQ(got.size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-5) << name << "[" << i << "]";
  }
}

TEST(DistributedTableRunTest, OnePserverSyncSgdEqualsALocalTable) { RunJob("sgd", 1, true); }
TEST(DistributedTableRunTest, TwoPserversSyncSgdEqualsALocalTable) { RunJob("sgd", 2, true); }
TEST(DistributedTableRunTest, TwoPserversAsyncAdagradEqualsALocalTable) { RunJob("adagrad", 2, false); }
TEST(DistributedTableRunTest, TwoPserversTwoTrainersSyncSumTheTablesGradients) {
  RunJob("sgd", 2, true, "", /*trainers=*/2);
}
TEST(DistributedTableRunTest, CheckpointNotifySavesEachShardAndItsAccumulator) {
  const std::string dir = ::testing::TempDir() + "/oar_table_ckpt";
  std::filesystem::remove_all(dir);
  RunJob("adagrad", 2, true, dir);
}

}  // namespace
}  // namespace oar
