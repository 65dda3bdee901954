// GEO-SGD through the user's path: a network transpiled with geo_sgd_mode
// (tests/util/ps_job.h: 2 pservers in-process), each trainer's
// GeoCommunicator made of the transpiler's placement as `oar run` makes it
// (GeoParamsOf), its programs run step by step. Checked by values: one
// trainer's GEO-SGD is its local training, and the pservers' parameters
// are their initial values plus every delta the trainers sent.
#include "trainer/geo_communicator.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/communicator_flags.h"
#include "gtest/gtest.h"
#include "tests/util/ps_job.h"

namespace oar {
namespace {

std::vector<float> Values(const Scope& scope, const std::string& name) {
  return TensorToVector<float>(scope.FindVar(name)->Get<Tensor>());
}

// A pserver variable: the block on whichever pserver holds it.
std::vector<float> OnPserver(const PserverJob& job, const std::string& block) {
  for (const auto& s : job.scopes) {
    if (s->FindVar(block) != nullptr) return Values(*s, block);
  }
  ADD_FAILURE() << "no pserver holds '" << block << "'";
  return {};
}

// A pserver parameter stacked from its blocks, as the trainer holds it.
std::vector<float> Stacked(const PserverJob& job, const GeoParam& p) {
  std::vector<float> out;
  for (const auto& b : p.blocks) {
    const auto v = OnPserver(job, b);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << what << "[" << i << "]";
}

TEST(GeoSgdTest, TheTranspilerWritesFluidsGeoPrograms) {
  PserverJob job(DistributeTranspilerConfig::GeoStrategy(5), 1);
  const BlockDesc& main = job.trainer[0].Block(0);
  EXPECT_EQ(main.Op(main.OpSize() - 1).type, "send");  // the optimizer stays, the send ends the program
  EXPECT_EQ(main.Op(main.OpSize() - 2).type, "sgd");
  EXPECT_TRUE(main.HasVar("w1.delta"));
  EXPECT_TRUE(main.HasVar("w1.block0.delta"));
  const BlockDesc& startup = job.trainer_startup[0].Block(0);
  EXPECT_EQ(startup.Op(startup.OpSize() - 1).GetAttr<std::vector<std::string>>("send_varnames"),
            std::vector<std::string>{"param_init"});
  const ProgramDesc& ps = *job.programs[0];
  const OpDesc& ls = ps.Block(0).Op(ps.Block(0).OpSize() - 1);
  EXPECT_EQ(ls.GetAttr<int32_t>("distributed_mode"), 3);
  for (size_t b = 1; b < ps.NumBlocks(); ++b) {
    ASSERT_EQ(ps.Block(b).OpSize(), 1u);
    const OpDesc& sum = ps.Block(b).Op(0);
    EXPECT_EQ(sum.type, "sum");
    EXPECT_EQ(sum.Input("X")[1], sum.Input("X")[0] + ".delta");
    EXPECT_EQ(sum.Output("Out")[0], sum.Input("X")[0]);
  }
  job.Stop();
}

// One trainer: every exchange sends train - old and pulls it back, so the
// trainer trains as one process would, and the pservers end where it ends.
TEST(GeoSgdTest, OneTrainerTrainsAsOneProcessAndThePserversFollow) {
  constexpr int kSteps = 10;
  PserverJob job(DistributeTranspilerConfig::GeoStrategy(3), 1);
  TrainerSide t(job);
  {
    auto s = t.exe.Run(job.trainer_startup[0], &t.scope);
    ASSERT_TRUE(s.ok()) << s.status();
  }
  const auto params = cli::GeoParamsOf(*job.transpilers[0], 0);
  ASSERT_EQ(params.size(), 4u);
  std::map<std::string, std::vector<float>> want;
  {  // the reference: one process from the values the trainer pulled
    JobModel ref("sgd");
    Executor exe;
    Scope scope;
    ASSERT_TRUE(exe.Run(ref.startup.desc(), &scope).ok());
    for (const auto& p : params) {
      const auto v = Values(t.scope, p.name);
      std::copy(v.begin(), v.end(), scope.FindVar(p.name)->GetMutable<Tensor>()->data<float>());
    }
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_TRUE(exe.Run(ref.main.desc(), &scope, JobBatch(step, 0, 8), {ref.loss.name()}).ok());
    }
    for (const auto& p : params) want[p.name] = Values(scope, p.name);
  }
  GeoCommunicator geo(params, &t.client, cli::GeoOptionsOf(job.transpilers[0]->config(), 1));
  t.env.geo = &geo;
  ASSERT_TRUE(geo.Start(&t.scope).ok());
  for (int step = 0; step < kSteps; ++step) {
    auto r = t.exe.Run(job.trainer[0], &t.scope, JobBatch(step, 0, 8), {job.loss});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(geo.exchanges(), 3);
  ASSERT_TRUE(geo.Flush().ok());
  EXPECT_EQ(geo.exchanges(), 4);
  t.env.geo = nullptr;
  for (const auto& p : params) {
    ExpectNear(Values(t.scope, p.name), want[p.name], p.name + " (trainer)");
    ExpectNear(Stacked(job, p), want[p.name], p.name + " (pservers)");
  }
  ASSERT_TRUE(t.exe.Close().ok());
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

// An elastic job divides each delta by the trainers live at the exchange
// (GeoOptions::trainers_now), not by the job's slots: with 4 slots and 2
// live, the pservers' parameters move by half of this trainer's progress.
TEST(GeoSgdTest, AnElasticJobsDeltasAreDividedByTheTrainersLiveAtTheExchange) {
  PserverJob job(DistributeTranspilerConfig::GeoStrategy(100), 1);
  TrainerSide t(job);
  ASSERT_TRUE(t.exe.Run(job.trainer_startup[0], &t.scope).ok());
  const auto params = cli::GeoParamsOf(*job.transpilers[0], 0);
  std::map<std::string, std::vector<float>> initial;
  for (const auto& p : params) initial[p.name] = Values(t.scope, p.name);
  int live = 2, asked = 0;
  GeoOptions o = cli::GeoOptionsOf(job.transpilers[0]->config(), 4);
  o.trainers_now = [&] {
    ++asked;
    return live;
  };
  GeoCommunicator geo(params, &t.client, o);
  t.env.geo = &geo;
  ASSERT_TRUE(geo.Start(&t.scope).ok());
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(t.exe.Run(job.trainer[0], &t.scope, JobBatch(step, 0, 8), {job.loss}).ok());
  }
  std::map<std::string, std::vector<float>> trained;
  for (const auto& p : params) trained[p.name] = Values(t.scope, p.name);
  ASSERT_TRUE(geo.Flush().ok());
  EXPECT_EQ(asked, 1);  // once per exchange
  for (const auto& p : params) {
    std::vector<float> want = initial[p.name];
    for (size_t i = 0; i < want.size(); ++i) want[i] += (trained[p.name][i] - initial[p.name][i]) / 2;
    ExpectNear(Stacked(job, p), want, p.name + " (pservers)");
  }
  t.env.geo = nullptr;
  ASSERT_TRUE(t.exe.Close().ok());
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

// Two trainers taking turns, exchanging every 2 steps: each pserver block
// ends as its initial value plus the sum of every delta sent to it.
TEST(GeoSgdTest, ThePserversAddEveryTrainersDeltas) {
  PserverJob job(DistributeTranspilerConfig::GeoStrategy(2), 2);
  std::vector<std::unique_ptr<TrainerSide>> trainers;
  std::vector<std::unique_ptr<GeoCommunicator>> geos;
  std::map<std::string, std::vector<float>> want;  // by pserver block
  const auto params0 = cli::GeoParamsOf(*job.transpilers[0], 0);
  for (const auto& p : params0) {
    for (const auto& b : p.blocks) want[b] = OnPserver(job, b);
  }
  for (int id = 0; id < 2; ++id) {
    trainers.push_back(std::make_unique<TrainerSide>(job));
    TrainerSide& t = *trainers.back();
    ASSERT_TRUE(t.exe.Run(job.trainer_startup[static_cast<size_t>(id)], &t.scope).ok());
    GeoOptions o = cli::GeoOptionsOf(job.transpilers[static_cast<size_t>(id)]->config(), 2);
    o.on_delta = [&want](const std::string& var, const Variable& delta) {
      auto& w = want[var.substr(0, var.size() - std::string(".delta").size())];
      const auto d = TensorToVector<float>(delta.Get<Tensor>());
      for (size_t i = 0; i < w.size(); ++i) w[i] += d[i];
    };
    geos.push_back(std::make_unique<GeoCommunicator>(cli::GeoParamsOf(*job.transpilers[static_cast<size_t>(id)], id),
                                                     &t.client, o));
    t.env.geo = geos.back().get();
    ASSERT_TRUE(geos.back()->Start(&t.scope).ok());
  }
  for (int step = 0; step < 7; ++step) {
    for (int id = 0; id < 2; ++id) {
      TrainerSide& t = *trainers[static_cast<size_t>(id)];
      auto r =
          t.exe.Run(job.trainer[static_cast<size_t>(id)], &t.scope, JobBatch(step, 4 * id, 4 * id + 4), {job.loss});
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }
  for (int id = 0; id < 2; ++id) {
    ASSERT_TRUE(geos[static_cast<size_t>(id)]->Flush().ok());
    EXPECT_EQ(geos[static_cast<size_t>(id)]->exchanges(), 4);
    trainers[static_cast<size_t>(id)]->env.geo = nullptr;
  }
  for (const auto& [block, values] : want) ExpectNear(OnPserver(job, block), values, block);
  for (auto& t : trainers) ASSERT_TRUE(t->exe.Close().ok());
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

// A sparse table: only the rows a trainer looked up travel, as SelectedRows
// of the block's rows; after the exchange those rows are the pservers', and
// the pservers' rows are their initial values plus the deltas.
TEST(GeoSgdTest, ASparseTableExchangesTheRowsItsLookupsTouched) {
  PserverJob job(DistributeTranspilerConfig::GeoStrategy(2), 1, SparseEmbeddingNet(0.5f));
  TrainerSide t(job);
  {
    auto s = t.exe.Run(job.trainer_startup[0], &t.scope);
    ASSERT_TRUE(s.ok()) << s.status();
  }
  const auto params = cli::GeoParamsOf(*job.transpilers[0], 0);
  const GeoParam* emb = nullptr;
  for (const auto& p : params) emb = p.name == "emb" ? &p : emb;
  ASSERT_NE(emb, nullptr);
  ASSERT_TRUE(emb->sparse);
  ASSERT_EQ(emb->blocks.size(), 2u);
  std::map<std::string, std::vector<float>> want;  // emb's blocks on the pservers
  for (const auto& b : emb->blocks) want[b] = OnPserver(job, b);
  GeoOptions o = cli::GeoOptionsOf(job.transpilers[0]->config(), 1);
  std::set<int64_t> sent_rows;  // of the whole table
  o.on_delta = [&](const std::string& var, const Variable& delta) {
    if (!delta.IsType<SelectedRows>()) return;
    const std::string block = var.substr(0, var.size() - std::string(".delta").size());
    const int64_t offset = block == emb->blocks[0] ? 0 : emb->rows[0];
    const SelectedRows& sr = delta.Get<SelectedRows>();
    const auto d = TensorToVector<float>(sr.value);
    for (size_t k = 0; k < sr.rows.size(); ++k) {
      sent_rows.insert(sr.rows[k] + offset);
      for (int j = 0; j < 8; ++j)
        want[block][static_cast<size_t>(sr.rows[k] * 8 + j)] += d[k * 8 + static_cast<size_t>(j)];
    }
  };
  GeoCommunicator geo(params, &t.client, o);
  t.env.geo = &geo;
  ASSERT_TRUE(geo.Start(&t.scope).ok());
  std::set<int64_t> looked_up;
  for (int step = 0; step < 6; ++step) {
    std::vector<int64_t> ids;
    std::vector<float> ys;
    for (int i = 0; i < 4; ++i) {
      ids.push_back((step * 997 + i * 1031) % 4096);  // rows in both blocks
      ys.push_back(0.1f * static_cast<float>(i));
      looked_up.insert(ids.back());
    }
    auto r = t.exe.Run(job.trainer[0], &t.scope,
                       {{"ids", MakeTensor<int64_t>({4, 1}, ids)}, {"y", MakeTensor<float>({4, 1}, ys)}}, {job.loss});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE(geo.Flush().ok());
  t.env.geo = nullptr;
  EXPECT_EQ(sent_rows, looked_up);
  for (const auto& [block, values] : want) ExpectNear(OnPserver(job, block), values, block);
  const auto trained = Values(t.scope, "emb");
  const auto on_pservers = Stacked(job, *emb);
  for (int64_t row : looked_up) {
    for (int j = 0; j < 8; ++j) {
      const size_t at = static_cast<size_t>(row * 8 + j);
      ASSERT_NEAR(trained[at], on_pservers[at], 1e-5) << "emb row " << row;
    }
  }
  ASSERT_TRUE(t.exe.Close().ok());
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

}  // namespace
}  // namespace oar
