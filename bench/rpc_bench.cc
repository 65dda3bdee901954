// rpc_bench: Oar's RPC layer between two processes on loopback, each figure
// beside its baseline from the same run: a raw TCP stream (raw_tcp.h) and a
// bare generic gRPC service with the same channel tuning (bare_grpc.h).
//   1. push + pull of a 4 MiB fp32 block: ours vs bare gRPC (target >= 0.9x
//      its throughput) and vs raw TCP (>= 0.5x);
//   2. a 64 MiB parameter in 16 blocks, all calls in flight: vs raw TCP, and
//      vs figure 1 (must not fall below it by more than 10%);
//   3. 64-byte round trip: ours vs bare gRPC (<= 1.2x) and raw TCP;
//   4. a sync round of 4 trainer threads with 1 MiB gradients through a real
//      ParameterServer (send, batch barrier, optimize, get, fetch barrier)
//      against the model 4 x 2 x 1 MiB / bare throughput + 4 bare round trips
//      (<= 1.5x);
//   5. pserver peak RSS holding a 256 MiB model (64 blocks, Adam) after a
//      full push + pull by 1 and by 4 trainers, over gRPC and over what
//      --rpc_transport=auto picks, against 1.3 x (parameters + state) +
//      64 MiB;
//   6. the cost of checking every request (its header against a declared
//      variable) and of applying each (trainer, sequence number) once: the
//      4 MiB push + pull and the 64 B round trip through a handler that does
//      both, against the same handler without them (targets <= 1.03x and
//      <= 1.05x). The client numbers its calls in both;
//   7. the stream transports (--rpc_transport=tcp and shm) to the same
//      checked handler: 4 MiB push + pull and 64 MiB in 16 blocks vs the
//      raw TCP stream (targets >= 0.85x and >= 0.80x), the 64 B round trip
//      vs a raw socket round trip (<= 1.3x); over shared memory the 4 MiB
//      push + pull vs memcpy of 4 MiB in this process (>= 0.5x), with the
//      push lent as a trainer's gradient is, and through the rings.
// The client re-executes itself as the server (--role=server / memory).
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "bench/bare_grpc.h"
#include "bench/bench_pserver_program.h"
#include "bench/bench_util.h"
#include "bench/raw_tcp.h"
#include "bench/rpc_bench_stream.h"
#include "cli/rpc_flags.h"
#include "common/base/host_cpus.h"
#include "common/base/malloc_tuning.h"
#include "common/framework/executor.h"
#include "common/framework/tensor_io.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/rpc_metrics.h"
#include "common/rpc/transport_select.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "pserver/pserver_metrics.h"
#include "pserver/replay_guard.h"
#include "pserver/var_store.h"

DEFINE_string(role, "client", "client (runs the benchmark), server or memory (spawned by the client)");
DEFINE_string(port_file, "", "server roles: write the ports here");
DEFINE_int32(trainers, 1, "memory role: the trainers (Fanin) of the 256 MiB model");
DEFINE_bool(stream_only, false, "run only the stream transports' figures (7)");

extern char** environ;

namespace oar::bench {
namespace {

// Ours, echo style: stores what is sent (into the previous value's buffer,
// as ParameterServer does), serves it back. `checked`: each request's header
// is checked against the first one seen under its name (dtype, shape; what
// VarStore::Admit does against a declaration) and each (trainer, sequence
// number) applied once through a ReplayGuard, as ParameterServer does.
class StoreHandler : public rpc::RpcHandler {
 public:
  explicit StoreHandler(bool checked) : checked_(checked), guard_(4) {}
  bool NeverBlocks(rpc::RpcKind) const override { return true; }  // a map under a short lock
  absl::Status Handle(rpc::RpcKind kind, const rpc::IncomingMessage& req, rpc::Reply* reply) override {
    const rpc::MessageHeader& h = req.header();
    const uint64_t seq = checked_ ? static_cast<uint64_t>(h.meta.oar_seq()) : 0;
    auto ticket = guard_.Begin(static_cast<int>(h.trainer_id()), seq, absl::Now() + absl::Seconds(10));
    if (!ticket.ok()) return ticket.status();
    absl::Status s = Apply(kind, req, reply);
    guard_.End(static_cast<int>(h.trainer_id()), seq, s);
    return s;
  }

 private:
  absl::Status Apply(rpc::RpcKind kind, const rpc::IncomingMessage& req, rpc::Reply* reply) {
    const rpc::MessageHeader& h = req.header();
    absl::MutexLock l(&mu_);
    if (kind == rpc::RpcKind::kSend) {
      if (checked_) {
        auto [decl, fresh] = declared_.try_emplace(h.name(), std::make_pair(h.dtype, h.dims));
        if (!fresh && (decl->second.first != h.dtype || decl->second.second != h.dims)) {
          return absl::InvalidArgumentError(absl::StrCat("'", h.name(), "' has the wrong dtype or shape"));
        }
      }
      req.DecodeInto(&vars_[h.name()]);
      return absl::OkStatus();
    }
    auto it = vars_.find(h.name());
    if (it == vars_.end()) return absl::NotFoundError(h.name());
    reply->name = it->first;
    reply->var = it->second;  // shares the buffer: no copy
    return absl::OkStatus();
  }

  const bool checked_;
  ReplayGuard guard_;
  absl::Mutex mu_;
  std::map<std::string, Variable> vars_;
  std::map<std::string, std::pair<DataType, DDim>> declared_;
};

int Server() {
  const int raw = StartRawTcpServer();
  BareService bare_service(64 * kMiB);
  int bare = 0;
  auto bare_server = StartBareServer(&bare_service, &bare);
  StoreHandler store(/*checked=*/true), unchecked(/*checked=*/false);
  auto ours = rpc::GrpcServer::Start({.endpoint = "127.0.0.1:0"}, &store);
  CHECK(ours.ok()) << ours.status();
  auto plain = rpc::GrpcServer::Start({.endpoint = "127.0.0.1:0"}, &unchecked);
  CHECK(plain.ok()) << plain.status();
  BenchPserver sync = MakeBenchPserver(1, kMiB / 4, /*adam=*/false, 4);
  Scope scope;
  Executor exe;
  CHECK(exe.Run(sync.startup, &scope).ok());
  rpc::GrpcTransport grpc(cli::RpcOptionsFromFlags());
  sync.config.transport = &grpc;
  auto ps = ParameterServer::Create(sync.config, sync.main, &scope);
  CHECK(ps.ok()) << ps.status();
  auto ps_ep = (*ps)->Start();
  CHECK(ps_ep.ok());
  std::thread loop([&] { CHECK((*ps)->Run().ok()); });
  StoreHandler streamed(/*checked=*/true);
  rpc::SelectingTransport selecting(rpc::TransportMode::kAuto, cli::RpcOptionsFromFlags());
  // gRPC + the stream transports; lent sends are read where the client
  // lent them. The store keeps such a view until the next push of the name
  // replaces it, but reads it only to answer a pull, which the bench's
  // client waits for before it pushes that name again.
  auto both = selecting.Listen({.endpoint = "127.0.0.1:0", .map_lent_sends = true}, &streamed);
  CHECK(both.ok()) << both.status();
  const std::string both_ep = (*both)->endpoint();
  CHECK(WriteFileAtomically(FLAGS_port_file, absl::StrCat(raw, " ", bare, " ", (*ours)->port(), " ",
                                                          ps_ep->substr(ps_ep->rfind(':') + 1), " ", (*plain)->port(),
                                                          " ", both_ep.substr(both_ep.rfind(':') + 1), "\n"))
            .ok());
  loop.join();
  std::this_thread::sleep_for(std::chrono::hours(1));  // killed by the client
  return 0;
}

int MemoryServer() {
  MapLargeAllocations();  // as a pserver role does (cli/process_settings.h)
  BenchPserver model = MakeBenchPserver(64, kMiB, /*adam=*/true, FLAGS_trainers);  // 64 x 4 MiB
  Scope scope;
  Executor exe;
  CHECK(exe.Run(model.startup, &scope).ok());
  rpc::SelectingTransport transport(rpc::TransportMode::kAuto,
                                    cli::RpcOptionsFromFlags());  // gRPC and the stream transports
  model.config.transport = &transport;
  auto ps = ParameterServer::Create(model.config, model.main, &scope);
  CHECK(ps.ok()) << ps.status();
  auto ep = (*ps)->Start();
  CHECK(ep.ok());
  CHECK(WriteFileAtomically(FLAGS_port_file, ep->substr(ep->rfind(':') + 1) + "\n").ok());
  absl::Status s = (*ps)->Run();
  return s.ok() ? 0 : 1;
}

struct Child {
  pid_t pid = -1;
  std::vector<int> ports;
  Child(const std::string& role, size_t nports, int trainers = 1) {
    const std::string file = "/tmp/oar_rpc_bench_" + std::to_string(::getpid()) + "_" + role;
    std::remove(file.c_str());
    std::vector<std::string> args = {"/proc/self/exe", "--role=" + role, "--port_file=" + file,
                                     "--trainers=" + std::to_string(trainers),
                                     "--rpc_shm_spin_us=" + std::to_string(FLAGS_rpc_shm_spin_us)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    CHECK_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    for (int i = 0; i < 3000 && ports.size() < nports; ++i) {
      std::ifstream in(file);
      ports.clear();
      int p;
      while (in >> p) ports.push_back(p);
      if (ports.size() < nports) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK_EQ(ports.size(), nports) << "server did not start";
  }
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  std::string Ep(size_t i) const { return "127.0.0.1:" + std::to_string(ports[i]); }
};

long StatusKb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string k;
  long v;
  std::string unit;
  while (in >> k) {
    if (k == key + ":") {
      in >> v >> unit;
      return v;
    }
  }
  return -1;
}

int Client() {
  // Client and server wait as `oar launch` has two processes wait.
  const int cpus = static_cast<int>(AllowedCpus().size());
  if (FLAGS_rpc_shm_spin_us < 0) {
    FLAGS_rpc_shm_spin_us = rpc::JobSpinMicros(2, cpus);
    std::printf(
        "shared-memory waits spin %d us before they sleep (as oar launch has 2 processes on %d CPUs wait; "
        "--rpc_shm_spin_us sets it)\n",
        FLAGS_rpc_shm_spin_us, cpus);
  } else {
    std::printf("shared-memory waits spin %d us before they sleep (--rpc_shm_spin_us)\n", FLAGS_rpc_shm_spin_us);
  }
  Child server("server", 6);
  RawTcpClient raw(server.ports[0]);
  CHECK(raw.ok());
  if (FLAGS_stream_only) {
    StreamFigures(server.Ep(5), raw, server.pid);
    return 0;
  }
  BareClient bare(server.Ep(1));
  rpc::GrpcTransport grpc(cli::RpcOptionsFromFlags());
  rpc::RpcClient ours(&grpc, rpc::ClientOptions{.deadline_ms = 60000, .retry_times = 0});
  const std::string ep = server.Ep(2);

  // 1. 4 MiB push + pull.
  Variable block = Floats(4 * kMiB);
  std::vector<char> sink(64 * kMiB);
  const void* data = block.Get<Tensor>().raw_data();
  Variable got4;  // pulled into the same variable every time, as recv does
  auto ours_4m = [&] {
    CHECK(ours.AsyncSendVar(ep, "w", &block)->Wait().ok());
    CHECK(ours.AsyncGetVar(ep, "w", &got4)->Wait().ok());
  };
  auto bare_4m = [&] { CHECK(bare.Push(data, 4 * kMiB) && bare.Pull(sink.data(), 4 * kMiB)); };
  auto raw_4m = [&] { CHECK(raw.Push(data, 4 * kMiB) && raw.Pull(sink.data(), 4 * kMiB)); };
  Paired vb = TimePaired(ours_4m, bare_4m, 10, 7);
  Paired vr = TimePaired(ours_4m, raw_4m, 10, 7);
  const double ours_gbps = GBps(8 * kMiB, vb.a_seconds);
  std::printf(
      "rpc_4MiB push+pull: ours %.2f GB/s, bare gRPC %.2f GB/s -> %.2fx (target >= 0.90x); raw TCP %.2f GB/s "
      "-> %.2fx (target >= 0.50x)\n",
      ours_gbps, GBps(8 * kMiB, vb.b_seconds), 1.0 / vb.ratio, GBps(8 * kMiB, vr.b_seconds), 1.0 / vr.ratio);

  // 2. 64 MiB in 16 blocks, all in flight.
  std::vector<Variable> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(Floats(4 * kMiB));
  std::vector<Variable> got(16);
  auto ours_64m = [&] {
    std::vector<std::shared_ptr<rpc::RpcCall>> calls;
    for (int i = 0; i < 16; ++i) calls.push_back(ours.AsyncSendVar(ep, "b" + std::to_string(i), &blocks[i]));
    for (auto& c : calls) CHECK(c->Wait().ok());
    calls.clear();
    for (int i = 0; i < 16; ++i) calls.push_back(ours.AsyncGetVar(ep, "b" + std::to_string(i), &got[i]));
    for (auto& c : calls) CHECK(c->Wait().ok());
  };
  Variable big = Floats(64 * kMiB);
  auto raw_64m = [&] { CHECK(raw.Push(big.Get<Tensor>().raw_data(), 64 * kMiB) && raw.Pull(sink.data(), 64 * kMiB)); };
  Paired big_r = TimePaired(ours_64m, raw_64m, 2, 5);
  const double big_gbps = GBps(128 * kMiB, big_r.a_seconds);
  std::printf(
      "rpc_64MiB in 16 blocks, in flight: ours %.2f GB/s, raw TCP %.2f GB/s -> %.2fx; vs the 4 MiB figure "
      "%.2fx (target >= 0.90x)\n",
      big_gbps, GBps(128 * kMiB, big_r.b_seconds), 1.0 / big_r.ratio, big_gbps / ours_gbps);

  // 3. 64-byte round trip.
  Variable small = Floats(64);
  auto ours_rt = [&] { CHECK(ours.AsyncSendVar(ep, "s", &small)->Wait().ok()); };
  auto bare_rt = [&] { CHECK(bare.Push(small.Get<Tensor>().raw_data(), 64)); };
  auto raw_rt = [&] { CHECK(raw.Push(small.Get<Tensor>().raw_data(), 64)); };
  Paired rt = TimePaired(ours_rt, bare_rt, 200, 7);
  Paired rt_raw = TimePaired(ours_rt, raw_rt, 200, 7);
  std::printf(
      "rpc_64B round trip: ours %.1f us, bare gRPC %.1f us -> %.2fx (target <= 1.20x); raw TCP %.1f us -> "
      "%.1fx\n",
      rt.a_seconds * 1e6, rt.b_seconds * 1e6, rt.ratio, rt_raw.b_seconds * 1e6, rt_raw.ratio);

  // 4. A sync round: 4 trainers, 1 MiB gradients, through the ParameterServer.
  const std::string ps = server.Ep(3);
  Variable grad = Floats(kMiB);
  auto trainer = [&](int t, int rounds) {
    rpc::RpcClient c(&grpc, rpc::ClientOptions{.deadline_ms = 60000, .retry_times = 0});
    Variable p;
    for (int r = 0; r < rounds; ++r) {
      CHECK(c.AsyncSendVar(ps, "p0@GRAD", &grad, {.trainer_id = t})->Wait().ok());
      CHECK(c.AsyncSendBatchBarrier(ps, t)->Wait().ok());
      CHECK(c.AsyncGetVar(ps, "p0", &p, t)->Wait().ok());
      CHECK(c.AsyncSendFetchBarrier(ps, t)->Wait().ok());
    }
  };
  {  // the initial pull
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([&, t] {
        rpc::RpcClient c(&grpc);
        Variable p;
        CHECK(c.AsyncGetVar(ps, "p0", &p, t)->Wait().ok());
        CHECK(c.AsyncSendFetchBarrier(ps, t)->Wait().ok());
      });
    }
    for (auto& th : ts) th.join();
  }
  // Interleaved: 5 chunks of 6 sync rounds, each followed by its model's
  // bare calls, so both see the same machine; the medians are compared.
  constexpr int kChunks = 5, kRoundsPerChunk = 6;
  auto bare_1m = [&] { CHECK(bare.Push(data, kMiB) && bare.Pull(sink.data(), kMiB)); };
  std::vector<double> rounds, bares;
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    auto start = std::chrono::steady_clock::now();
    {
      std::vector<std::thread> ts;
      for (int t = 0; t < 4; ++t) ts.emplace_back(trainer, t, kRoundsPerChunk);
      for (auto& th : ts) th.join();
    }
    rounds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRoundsPerChunk);
    bares.push_back(TimeCalls(bare_1m, 4));  // 2 MiB moved a call
  }
  const double round = Median(rounds);
  const double model = 4 * Median(bares) + 4 * rt.b_seconds;
  std::printf(
      "rpc_sync_round 4 trainers x 1 MiB: %.2f ms, model 4 x 2 x 1 MiB / bare gRPC + 4 bare round trips = "
      "%.2f ms -> %.2fx (target <= 1.50x)\n",
      round * 1e3, model * 1e3, round / model);
  for (int t = 0; t < 4; ++t) CHECK(ours.AsyncSendComplete(ps, t)->Wait().ok());

  // 5. Pserver memory with a 256 MiB model and Adam, pushed by 1 and by 4
  // trainers, over gRPC and over what auto picks (shared memory here: each
  // connection keeps received buffers in its BufferPool).
  rpc::SelectingTransport chosen(rpc::TransportMode::kAuto, cli::RpcOptionsFromFlags());
  for (auto [via, transport] : {std::pair<const char*, rpc::Transport*>{"grpc", &grpc}, {"auto", &chosen}})
    for (int trainers : {1, 4}) {
      Child mem("memory", 1, trainers);
      const std::string mep = mem.Ep(0);
      const long before_kb = StatusKb(mem.pid, "VmRSS");
      Variable g4 = Floats(4 * kMiB);
      auto push_pull = [&](int t) {
        rpc::RpcClient c(transport, rpc::ClientOptions{.deadline_ms = 120000, .retry_times = 0});
        CHECK(c.AsyncSendFetchBarrier(mep, t)->Wait().ok());  // ends the initial-pull phase
        for (int i = 0; i < 64; i += 8) {
          std::vector<std::shared_ptr<rpc::RpcCall>> calls;
          for (int k = i; k < i + 8; ++k) {
            calls.push_back(c.AsyncSendVar(mep, "p" + std::to_string(k) + "@GRAD", &g4, {.trainer_id = t}));
          }
          for (auto& call : calls) {
            absl::Status st = call->Wait();
            CHECK(st.ok()) << st;
          }
        }
        CHECK(c.AsyncSendBatchBarrier(mep, t)->Wait().ok());
        for (int i = 0; i < 64; i += 8) {
          std::vector<Variable> got(8);
          std::vector<std::shared_ptr<rpc::RpcCall>> calls;
          for (int k = i; k < i + 8; ++k) calls.push_back(c.AsyncGetVar(mep, "p" + std::to_string(k), &got[k - i], t));
          for (auto& call : calls) {
            absl::Status st = call->Wait();
            CHECK(st.ok()) << st;
          }
        }
        CHECK(c.AsyncSendFetchBarrier(mep, t)->Wait().ok());
      };
      std::vector<std::thread> ts;
      for (int t = 0; t < trainers; ++t) ts.emplace_back(push_pull, t);
      for (auto& th : ts) th.join();
      const long peak_kb = StatusKb(mem.pid, "VmHWM");
      for (int t = 0; t < trainers; ++t) CHECK(ours.AsyncSendComplete(mep, t)->Wait().ok());
      const double state_mib = 256.0 * 3;  // parameters + two Adam moments
      std::printf(
          "pserver_memory %d trainer(s) over %s, 256 MiB model + Adam state (%.0f MiB): peak RSS %.0f MiB (at "
          "start %.0f MiB), budget 1.3 x %.0f + 64 = %.0f MiB -> %s\n",
          trainers, via, state_mib, peak_kb / 1024.0, before_kb / 1024.0, state_mib, 1.3 * state_mib + 64,
          peak_kb / 1024.0 <= 1.3 * state_mib + 64 ? "within" : "OVER");
    }

  // 6. What checking and de-duplicating every request costs.
  const std::string unchecked_ep = server.Ep(4);
  auto plain_4m = [&] {
    CHECK(ours.AsyncSendVar(unchecked_ep, "w", &block)->Wait().ok());
    CHECK(ours.AsyncGetVar(unchecked_ep, "w", &got4)->Wait().ok());
  };
  auto plain_rt = [&] { CHECK(ours.AsyncSendVar(unchecked_ep, "s", &small)->Wait().ok()); };
  Paired c4 = TimePaired(ours_4m, plain_4m, 10, 15);
  Paired crt = TimePaired(ours_rt, plain_rt, 200, 15);
  std::printf(
      "rpc_checked 4 MiB push+pull: %.2f GB/s checked, %.2f GB/s unchecked -> %.3fx time (target <= 1.03x); "
      "64 B round trip: %.1f us checked, %.1f us unchecked -> %.3fx (target <= 1.05x)\n",
      GBps(8 * kMiB, c4.a_seconds), GBps(8 * kMiB, c4.b_seconds), c4.ratio, crt.a_seconds * 1e6, crt.b_seconds * 1e6,
      crt.ratio);
  // The same costs without the network's noise: what a pserver adds to one
  // gradient message — VarStore::Admit of its header against the
  // declaration and a ReplayGuard Begin/End — timed alone.
  {
    BenchPserver decl = MakeBenchPserver(1, kMiB, /*adam=*/false, 1);
    Scope scope;
    auto store = VarStore::Create(decl.main, &scope, 1, true, decl.config.grad_to_block_id);
    CHECK(store.ok()) << store.status();
    ReplayGuard guard(1);
    sendrecv::VariableMessage meta;
    meta.set_varname("p0@GRAD");
    Variable g = Floats(4 * kMiB);
    auto header = rpc::HeaderOf(meta, &g);
    CHECK(header.ok());
    const uint64_t base = uint64_t{3} << rpc::kSeqCounterBits;
    uint64_t seq = 0;
    const double per = TimeCalls(
                           [&] {
                             for (int i = 0; i < 1000; ++i) {
                               ++seq;
                               CHECK(guard.Begin(0, base | seq, absl::InfiniteFuture())->duplicate == false);
                               CHECK((*store)->Admit(*header, 0).ok());
                               guard.End(0, base | seq, absl::OkStatus());
                             }
                           },
                           200) /
                       1000;
    std::printf(
        "rpc_checked per message: %.2f us to check a header and apply its sequence number once = %.2f%% of "
        "the unchecked 64 B round trip, %.3f%% of the 4 MiB push+pull\n",
        per * 1e6, 100 * per / crt.b_seconds, 100 * 2 * per / c4.b_seconds);
  }
  // What the metrics add to one RPC, timed alone: the client's record of the
  // call, the server's queue-depth gauge (up and down) and the pserver's
  // record of the request, as the code paths make them.
  {
    metrics::Gauge* depth = rpc::Metrics().server_queue_depth->With({"SendVariable"});
    const std::string peer = "127.0.0.1:6174";
    const double per = TimeCalls(
                           [&] {
                             for (int i = 0; i < 1000; ++i) {
                               rpc::RecordClientCall("SendVariable", peer, 1e-4, 4096, 0, absl::OkStatus());
                               depth->Add(1);
                               depth->Add(-1);
                               RecordPserverRequest("SendVariable", 1e-4);
                             }
                           },
                           200) /
                       1000;
    std::printf(
        "rpc_metrics per call: %.2f us to record one RPC on both ends = %.2f%% of the 64 B round trip, "
        "%.3f%% of the 4 MiB push+pull (target <= 3%%)\n",
        per * 1e6, 100 * per / crt.b_seconds, 100 * 2 * per / c4.b_seconds);
  }
  StreamFigures(server.Ep(5), raw, server.pid);
  return 0;
}

}  // namespace
}  // namespace oar::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_role == "server") return oar::bench::Server();
  if (FLAGS_role == "memory") return oar::bench::MemoryServer();
  return oar::bench::Client();
}
