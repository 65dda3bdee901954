// ctr_bench's distributed-table sections (issue 16):
//  - prefetch: two in-process pservers hold a transpiled table [10M, 16]
//    (rows made on first use); a trainer-side program split_ids → prefetch
//    → merge_ids fetches 1000 random ids on loopback, over gRPC and over
//    Oar's TCP stream. Reported: each one's median latency beside a raw-TCP
//    64 B round trip timed in the same rounds (issue 52's target: <= 3 of
//    them over the stream).
//  - memory: a pserver's table of 10M touched rows × 16 fp32 with Adagrad
//    (the table and its Moment, which follows the table's rows), filled by
//    the adagrad op itself from SelectedRows gradients of 100k rows; peak
//    resident memory of a fresh process beside the budget
//    1.5 × rows × (16 + 16) × 4 B + 64 MiB.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_util.h"
#include "bench/raw_tcp.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/transport_select.h"
#include "glog/logging.h"
#include "pserver/pserver_ops.h"
#include "pserver/sparse_tables.h"
#include "tests/util/listen_socket.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"

namespace oar::bench {
namespace {

constexpr int64_t kRows = 10'000'000, kWidth = 16;

// Peak and current resident set of this process, in bytes.
std::pair<int64_t, int64_t> Rss() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb, hwm = 0, rss = 0;
  std::string unit;
  while (in >> key) {
    if (key == "VmHWM:" && in >> kb >> unit) hwm = kb * 1024;
    if (key == "VmRSS:" && in >> kb >> unit) rss = kb * 1024;
  }
  return {hwm, rss};
}

}  // namespace

int RunPrefetchBench() {
  OpRegistry::ExtendGlobal(RegisterPserverOps);
  OpRegistry::ExtendGlobal(RegisterDistOps);
  const std::vector<std::string> eps = {ReservedEndpoint(), ReservedEndpoint()};  // listening already
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    ParamAttr table;
    table.name = "table";
    Var e = layers::embedding(layers::data("ids", {1}, DataType::kInt64), {kRows, kWidth}, true, true, -1, table);
    optimizer::SGD(0.1f).minimize(layers::mean(e));
  }
  DistributeTranspiler t;
  CHECK(t.transpile(0, &main.desc(), absl::StrJoin(eps, ","), 1, /*sync=*/false, &startup.desc()).ok());
  std::vector<std::thread> servers;
  for (const auto& ep : eps) {
    auto programs = t.get_pserver_programs(ep);
    CHECK(programs.ok()) << programs.status();
    servers.emplace_back([p = *programs] {
      Executor exe;
      Scope scope;
      CHECK(PrepareSparseTables(p.first, &scope).ok());
      CHECK(exe.Run(p.second, &scope).ok());
      auto s = exe.Run(p.first, &scope);
      CHECK(s.ok()) << s.status();
    });
  }
  // The trainer side of the lookup: the transpiler's own ops.
  ProgramDesc fetch;
  {
    UniqueNameGuard n2;
    Program m2, s2;
    ProgramGuard g(&m2, &s2);
    ParamAttr table;
    table.name = "table";
    layers::embedding(layers::data("ids", {1}, DataType::kInt64), {kRows, kWidth}, true, true, -1, table);
    fetch = m2.desc();
  }
  CHECK(t.PrefetchDistributedTable(&fetch).ok());
  std::string out_name;
  for (size_t i = 0; i < fetch.Block(0).OpSize(); ++i) {
    if (fetch.Block(0).Op(i).type == "merge_ids") out_name = fetch.Block(0).Op(i).Output("Out")[0];
  }
  // Each transport a trainer may use: gRPC (Fluid's), and Oar's TCP stream,
  // which a trainer on another host picks (`--rpc_transport=auto`).
  rpc::GrpcTransport grpc;
  rpc::SelectingTransport tcp(rpc::TransportMode::kTcp);
  rpc::RpcClient grpc_client(&grpc), tcp_client(&tcp);
  RunEnv grpc_env = rpc::ClientEnv(&grpc_client), tcp_env = rpc::ClientEnv(&tcp_client);
  CHECK(grpc_client.WaitServerReady(eps, 30000).ok());
  CHECK(tcp_client.WaitServerReady(eps, 30000).ok());
  Executor grpc_exe(CPUPlace(), ExecutorOptions{.env = &grpc_env});
  Executor tcp_exe(CPUPlace(), ExecutorOptions{.env = &tcp_env});
  Scope scope;
  std::mt19937_64 rng(3);
  std::vector<int64_t> ids(1000);
  auto prefetch = [&](Executor* exe) {
    for (auto& id : ids) id = static_cast<int64_t>(rng() % 1000000);
    auto r = exe->Run(fetch, &scope, {{"ids", MakeTensor<int64_t>({1000, 1}, ids)}}, {out_name});
    CHECK(r.ok()) << r.status();
    CHECK_EQ((*r)[0].numel(), 1000 * kWidth);
  };
  const int raw_port = StartRawTcpServer();
  RawTcpClient raw(raw_port);
  CHECK(raw.ok());
  char small[64] = {};
  auto round_trip = [&] { CHECK(raw.Push(small, 64) && raw.Pull(small, 64)); };
  for (int i = 0; i < 50; ++i) prefetch(&grpc_exe), prefetch(&tcp_exe);  // rows made on first use, connections up
  std::printf("ctr_bench: prefetch of 1000 ids x %lld floats from 2 pservers (table [%lld, %lld], loopback)\n",
              static_cast<long long>(kWidth), static_cast<long long>(kRows), static_cast<long long>(kWidth));
  for (auto [name, exe] : {std::pair<const char*, Executor*>{"gRPC", &grpc_exe}, {"Oar's TCP stream", &tcp_exe}}) {
    Paired p = TimePaired([&, exe = exe] { prefetch(exe); }, round_trip, 100, 7);
    std::printf("  over %-16s prefetch %.0f us; raw TCP 64 B push+pull %.0f us -> %.1f round trips%s\n", name,
                p.a_seconds * 1e6, p.b_seconds * 1e6, p.ratio,
                exe == &tcp_exe ? " (target <= 3, the path between hosts)" : "");
  }
  CHECK(grpc_exe.Close().ok());
  for (auto& s : servers) s.join();
  return 0;
}

int RunTableMemoryBench() {
  const auto [hwm0, rss0] = Rss();
  Scope scope;
  SparseTable* param = scope.Var("table")->GetMutable<SparseTable>();
  SparseTable* moment = scope.Var("moment")->GetMutable<SparseTable>();
  CHECK(param->Configure(kWidth).ok());
  param->SetInitializer({RowInitializer::Kind::kUniform, -0.1f, 0.1f, 1});
  moment->SetInitializer({RowInitializer::Kind::kConstant, 0.0f, 0});
  CHECK(moment->Follow(*param).ok());
  *scope.Var("lr")->GetMutable<Tensor>() = MakeTensor<float>({1}, {0.01f});
  ProgramDesc p;
  BlockDesc* b = p.MutableBlock(0);
  OpDesc* op = b->AppendOp();
  op->type = "adagrad";
  op->SetInput("Param", {"table"});
  op->SetInput("Grad", {"grad"});
  op->SetInput("Moment", {"moment"});
  op->SetInput("LearningRate", {"lr"});
  op->SetOutput("ParamOut", {"table"});
  op->SetOutput("MomentOut", {"moment"});
  Executor exe;
  constexpr int64_t kBatch = 100'000;
  std::mt19937_64 rng(5);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < kRows; first += kBatch) {
    SelectedRows* g = scope.Var("grad")->GetMutable<SelectedRows>();
    g->height = kRows;
    g->rows.resize(kBatch);
    for (int64_t i = 0; i < kBatch; ++i) g->rows[i] = first + i;  // each row touched once: 10M rows in all
    float* v = g->value.mutable_data<float>(DDim{kBatch, kWidth});
    for (int64_t i = 0; i < kBatch * kWidth; ++i) v[i] = static_cast<float>(rng() % 1000) * 1e-3f;
    auto r = exe.Run(p, &scope);
    CHECK(r.ok()) << r.status();
  }
  scope.Var("grad")->Clear();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto [hwm, rss] = Rss();
  const double data = static_cast<double>(kRows) * (kWidth + kWidth) * 4;
  const double budget = 1.5 * data + 64.0 * (1 << 20);
  std::printf("ctr_bench: a pserver table of %lld touched rows x %lld fp32 with Adagrad (%.2f s to touch them)\n",
              static_cast<long long>(param->size()), static_cast<long long>(kWidth), secs);
  std::printf(
      "  rows + moment %.0f MiB; table objects %.0f MiB; process peak RSS %.0f MiB (%.0f MiB before): "
      "budget 1.5 x %.0f MiB + 64 MiB = %.0f MiB -> %s\n",
      data / 1048576, (param->MemoryBytes() + moment->MemoryBytes()) / 1048576.0, hwm / 1048576.0, hwm0 / 1048576.0,
      data / 1048576, budget / 1048576, hwm <= budget ? "within" : "OVER");
  (void)rss;
  (void)rss0;
  return 0;
}

}  // namespace oar::bench
