#include "bench/rpc_bench_stream.h"

#include <sched.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "cli/rpc_flags.h"
#include "common/base/host_cpus.h"
#include "common/framework/tensor.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/rpc_metrics.h"
#include "common/rpc/transport_select.h"
#include "glog/logging.h"

namespace oar::bench {
namespace {

// Puts every thread of process `pid` (0: this thread only) on `cpus`.
void Pin(pid_t pid, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (pid == 0) {
    CHECK_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
    return;
  }
  for (const auto& task : std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
    sched_setaffinity(std::stoi(task.path().filename().string()), sizeof(set), &set);  // a thread may be gone
  }
}

}  // namespace

Variable Floats(size_t bytes) {
  Variable v;
  float* p = v.GetMutable<Tensor>()->mutable_data<float>({static_cast<int64_t>(bytes / 4)});
  for (size_t i = 0; i < bytes / 4; ++i) p[i] = static_cast<float>(i % 97);
  return v;
}

void StreamFigures(const std::string& ep, RawTcpClient& raw, pid_t server) {
  Variable block = Floats(4 * kMiB), small = Floats(64);
  std::vector<char> sink(64 * kMiB);
  const void* data = block.Get<Tensor>().raw_data();
  auto raw_4m = [&] { CHECK(raw.Push(data, 4 * kMiB) && raw.Pull(sink.data(), 4 * kMiB)); };
  Variable big = Floats(64 * kMiB);
  auto raw_64m = [&] { CHECK(raw.Push(big.Get<Tensor>().raw_data(), 64 * kMiB) && raw.Pull(sink.data(), 64 * kMiB)); };
  auto raw_rt = [&] { CHECK(raw.Push(small.Get<Tensor>().raw_data(), 64)); };
  std::vector<Variable> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(Floats(4 * kMiB));
  for (rpc::TransportMode mode : {rpc::TransportMode::kTcp, rpc::TransportMode::kShm}) {
    rpc::SelectingTransport transport(mode, cli::RpcOptionsFromFlags());
    rpc::RpcClient c(&transport, rpc::ClientOptions{.deadline_ms = 60000, .retry_times = 0});
    const char* name = rpc::TransportModeName(mode);
    Variable got4;
    auto push_pull = [&] {
      CHECK(c.AsyncSendVar(ep, "w", &block)->Wait().ok());
      CHECK(c.AsyncGetVar(ep, "w", &got4)->Wait().ok());
    };
    // The push as a trainer's send op makes it: its payload may be lent
    // (a sync pserver on this host reads it where the trainer copied it).
    auto lent_push_pull = [&] {
      CHECK(c.AsyncSendVar(ep, "w", &block, {.lend_payload = true})->Wait().ok());
      CHECK(c.AsyncGetVar(ep, "w", &got4)->Wait().ok());
    };
    auto round_trip = [&] { CHECK(c.AsyncSendVar(ep, "s", &small)->Wait().ok()); };
    std::vector<Variable> got(16);
    auto in_flight = [&] {
      std::vector<std::shared_ptr<rpc::RpcCall>> calls;
      for (int i = 0; i < 16; ++i) calls.push_back(c.AsyncSendVar(ep, "b" + std::to_string(i), &blocks[i]));
      for (auto& call : calls) CHECK(call->Wait().ok());
      calls.clear();
      for (int i = 0; i < 16; ++i) calls.push_back(c.AsyncGetVar(ep, "b" + std::to_string(i), &got[i]));
      for (auto& call : calls) CHECK(call->Wait().ok());
    };
    push_pull();
    CHECK_EQ(transport.ChosenFor(ep), name) << "the bench did not get the transport it asked for";
    CHECK(std::memcmp(got4.Get<Tensor>().raw_data(), data, 4 * kMiB) == 0);
    Paired v64 = TimePaired(in_flight, raw_64m, 2, 5);
    Paired vrt = TimePaired(round_trip, raw_rt, 200, 9);
    if (mode == rpc::TransportMode::kTcp) {
      Paired v4 = TimePaired(push_pull, raw_4m, 10, 9);
      std::printf("stream_tcp 4MiB push+pull: %.2f GB/s, raw TCP %.2f GB/s -> %.2fx (target >= 0.85x)\n",
                  GBps(8 * kMiB, v4.a_seconds), GBps(8 * kMiB, v4.b_seconds), 1.0 / v4.ratio);
    } else {
      std::vector<char> from(4 * kMiB, 'x'), to(4 * kMiB);
      auto copy = [&] {
        std::memcpy(to.data(), from.data(), from.size());
        from[static_cast<unsigned char>(to[17]) % 64] ^= 1;  // keep the copy from being dropped
      };
      Paired vm = TimePaired(push_pull, copy, 10, 9);
      const double ours = GBps(8 * kMiB, vm.a_seconds), mem = GBps(4 * kMiB, vm.b_seconds);
      std::printf("stream_shm 4MiB push+pull through the rings: %.2f GB/s, memcpy of 4 MiB %.2f GB/s -> %.2fx\n", ours,
                  mem, ours / mem);
      const double lent_before = rpc::Metrics().client_lent_bytes->With({})->Value();
      lent_push_pull();
      CHECK(std::memcmp(got4.Get<Tensor>().raw_data(), data, 4 * kMiB) == 0);
      CHECK_EQ(rpc::Metrics().client_lent_bytes->With({})->Value() - lent_before, 4.0 * kMiB)
          << "the push was not lent (the server declined, or the region is full)";
      Paired vl = TimePaired(lent_push_pull, copy, 10, 9);
      const double lent = GBps(8 * kMiB, vl.a_seconds), mem2 = GBps(4 * kMiB, vl.b_seconds);
      std::printf(
          "stream_shm 4MiB push+pull, the push lent as a trainer's gradient is: %.2f GB/s, memcpy of 4 MiB "
          "%.2f GB/s -> %.2fx (target >= 0.50x)\n",
          lent, mem2, lent / mem2);
    }
    std::printf("stream_%s 64MiB in 16 blocks, in flight: %.2f GB/s, raw TCP %.2f GB/s -> %.2fx%s\n", name,
                GBps(128 * kMiB, v64.a_seconds), GBps(128 * kMiB, v64.b_seconds), 1.0 / v64.ratio,
                mode == rpc::TransportMode::kTcp ? " (target >= 0.80x)" : "");
    std::printf("stream_%s 64B round trip: %.1f us, raw TCP %.1f us -> %.2fx%s\n", name, vrt.a_seconds * 1e6,
                vrt.b_seconds * 1e6, vrt.ratio,
                mode == rpc::TransportMode::kTcp ? " (target <= 1.30x; the caller reads its own reply)" : "");
    // Where the scheduler puts the two ends decides a round trip (a wake-up
    // on an idle core costs tens of microseconds on a VM): the same figure
    // with both on one CPU, and with each on its own, both sides alike.
    const std::vector<int> cpus = AllowedCpus();
    if (mode == rpc::TransportMode::kTcp && cpus.size() >= 2) {
      for (bool apart : {false, true}) {
        Pin(0, {cpus[0]});
        Pin(server, {cpus[apart ? 1 : 0]});
        Paired p = TimePaired(round_trip, raw_rt, 200, 9);
        std::printf("stream_tcp 64B round trip, %s: %.1f us, raw TCP %.1f us -> %.2fx\n",
                    apart ? "client and server on CPUs of their own" : "client and server on one CPU",
                    p.a_seconds * 1e6, p.b_seconds * 1e6, p.ratio);
      }
      Pin(0, cpus);
      Pin(server, cpus);
    }
  }
}

}  // namespace oar::bench
