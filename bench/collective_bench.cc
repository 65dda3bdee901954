// collective_bench: the TCP ring, and shared memory joined over it, between
// 2 and 4 processes on loopback, each figure beside its baseline from the
// same run:
//   1. all-reduce bus bandwidth (2(n-1)/n x bytes / time) of 4 MiB and
//      64 MiB fp32: the ring's against a raw TCP stream between ranks 0 and
//      1 of the same processes, written with plain sockets (target >= 0.7x),
//      and for scale against both ranks streaming to each other at once (a
//      2-rank ring's traffic at the kernel's speed); shared memory's against
//      a memcpy of the same run (its own medium, not a socket);
//   2. a 4-byte all-reduce between 2 processes against a raw 4-byte round
//      trip (target <= 2x);
//   3. PyTorch's Gloo all_reduce, when `python3 -c "import torch"` works and
//      --gloo_script names ../shared/peers/torch_allreduce.py (target >= 1.0x;
//      nothing is printed for it where it cannot run here);
//   4. fashion_mlp at a global batch of 256: `oar launch --mode nccl2` with
//      2 trainers (shared memory, and the TCP ring) against 1 trainer alone
//      (issue 52: target >= 1.6x) and against the 2 pservers x 2 trainers job (target
//      >= 1.0x), 1 BLAS thread each; medians of interleaved rounds.
// Ranks 1..n-1 are this binary run again (--role=rank).
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/raw_tcp.h"
#include "common/base/blas_core.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/util/listen_socket.h"
#include "tests/util/oar_process.h"
#include "trainer/collective/shm_collective.h"
#include "trainer/collective/tcp_ring.h"

DEFINE_string(role, "main", "main (runs the benchmark) or rank (spawned by main)");
DEFINE_int32(rank, 0, "rank role: this rank");
DEFINE_string(endpoints, "", "rank role: every rank's ring endpoint");
DEFINE_int32(raw_port, 0, "rank role: the raw-socket port rank 1 listens on");
DEFINE_string(gloo_script, "../shared/peers/torch_allreduce.py", "PyTorch Gloo peer script (used when torch imports)");
DEFINE_bool(training, true, "also time fashion_mlp training (oar launch)");
DEFINE_int32(launch_rounds, 3, "interleaved rounds of the training jobs (medians printed)");

extern char** environ;

namespace oar::bench {
namespace {

constexpr size_t kMiB = 1 << 20;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A plain socket pair between ranks 0 and 1: rank 1 listens.
int RawConnect(int rank, int port) {
  if (rank == 1) {
    const int ls = TakeListenSocket(port);  // handed to this rank by rank 0
    CHECK_GE(ls, 0) << "rank 1 was handed no socket for port " << port;
    int fd = ::accept(ls, nullptr, nullptr);
    ::close(ls);
    NoDelay(fd);
    return fd;
  }
  for (int i = 0; i < 500; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      NoDelay(fd);
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  LOG(FATAL) << "raw connect failed";
}

struct Figures {
  double raw_gbps = 0, duplex_gbps = 0, ring4_busbw = 0, ring64_busbw = 0, tiny_us = 0, raw_rtt_us = 0;
  double memcpy_gbps = 0, shm4_busbw = 0, shm64_busbw = 0, shm_tiny_us = 0;  // shared memory, joined over the ring
};

// Every rank runs this; rank 0's figures are the ones printed.
Figures RunRank(int rank, const std::vector<std::string>& eps, int raw_port) {
  const int n = static_cast<int>(eps.size());
  auto ring =
      TcpRing::Create({.rank = rank, .endpoints = eps, .token = "collective_bench", .timeout = absl::Seconds(120)});
  CHECK(ring.ok()) << ring.status();
  Collective* c = ring->get();
  const int raw = rank <= 1 ? RawConnect(rank, raw_port) : -1;
  std::vector<char> big(64 * kMiB), ack(1);
  auto raw_stream = [&](size_t bytes) {  // rank 0 -> rank 1, acknowledged
    if (rank == 0) {
      CHECK(WriteAll(raw, big.data(), bytes));
      CHECK(ReadAll(raw, ack.data(), 1));
    } else if (rank == 1) {
      CHECK(ReadAll(raw, big.data(), bytes));
      CHECK(WriteAll(raw, ack.data(), 1));
    }
  };
  // Ranks 0 and 1 send `bytes` to each other at once: what a 2-rank ring
  // does, at the kernel's speed; on a CPU-bound loopback the upper bound.
  std::vector<char> back(64 * kMiB);
  auto raw_duplex = [&](size_t bytes) {
    if (rank > 1) return;
    std::thread sender([&] { CHECK(WriteAll(raw, big.data(), bytes)); });
    CHECK(ReadAll(raw, back.data(), bytes));
    sender.join();
  };
  auto raw_rtt = [&] {
    if (rank == 0) {
      CHECK(WriteAll(raw, big.data(), 4));
      CHECK(ReadAll(raw, big.data(), 4));
    } else if (rank == 1) {
      CHECK(ReadAll(raw, big.data(), 4));
      CHECK(WriteAll(raw, big.data(), 4));
    }
  };
  Tensor t4, t64, tiny;
  std::fill_n(t4.mutable_data<float>({int64_t(kMiB)}), kMiB, 1.0f);
  std::fill_n(t64.mutable_data<float>({int64_t(16 * kMiB)}), 16 * kMiB, 1.0f);
  tiny.mutable_data<float>({1})[0] = 1.0f;
  auto time = [&](const std::function<void()>& fn, int warm, int iters) {
    for (int i = 0; i < warm; ++i) fn();
    CHECK(c->Barrier().ok());
    const double t0 = Now();
    for (int i = 0; i < iters; ++i) fn();
    return (Now() - t0) / iters;
  };
  std::vector<double> raw64, duplex64, r4, r64, tinyv, rttv;
  for (int round = 0; round < 3; ++round) {  // interleaved: the machine's noise hits both alike
    raw64.push_back(time([&] { raw_stream(64 * kMiB); }, 1, 5));
    duplex64.push_back(time([&] { raw_duplex(64 * kMiB); }, 1, 5));
    r4.push_back(time([&] { CHECK(c->AllReduce(&t4, "4MiB").ok()); }, 3, 20));
    r64.push_back(time([&] { CHECK(c->AllReduce(&t64, "64MiB").ok()); }, 1, 5));
    if (n == 2) {
      rttv.push_back(time(raw_rtt, 100, 1000));
      tinyv.push_back(time([&] { CHECK(c->AllReduce(&tiny, "4B").ok()); }, 100, 1000));
    }
  }
  if (raw >= 0) ::close(raw);
  // The same all-reduces through shared memory, joined over the ring.
  auto shm = JoinOverSharedMemory(*std::move(ring), eps, {.transport = "shm", .timeout = absl::Seconds(120)});
  CHECK(shm.ok()) << shm.status();
  c = shm->get();
  std::vector<double> copy64, s4, s64, stiny;
  for (int round = 0; round < 3; ++round) {
    copy64.push_back(time([&] { std::memcpy(back.data(), big.data(), 64 * kMiB); }, 1, 5));
    s4.push_back(time([&] { CHECK(c->AllReduce(&t4, "4MiB").ok()); }, 3, 20));
    s64.push_back(time([&] { CHECK(c->AllReduce(&t64, "64MiB").ok()); }, 1, 5));
    if (n == 2) stiny.push_back(time([&] { CHECK(c->AllReduce(&tiny, "4B").ok()); }, 100, 1000));
  }
  const double bus = 2.0 * (n - 1) / n;
  Figures f;
  f.memcpy_gbps = 64.0 * kMiB / Median(copy64) / 1e9;
  f.shm4_busbw = bus * 4 * kMiB / Median(s4) / 1e9;
  f.shm64_busbw = bus * 64 * kMiB / Median(s64) / 1e9;
  if (n == 2) f.shm_tiny_us = Median(stiny) * 1e6;
  f.raw_gbps = 64.0 * kMiB / Median(raw64) / 1e9;
  f.duplex_gbps = 64.0 * kMiB / Median(duplex64) / 1e9;
  f.ring4_busbw = bus * 4 * kMiB / Median(r4) / 1e9;
  f.ring64_busbw = bus * 64 * kMiB / Median(r64) / 1e9;
  if (n == 2) {
    f.tiny_us = Median(tinyv) * 1e6;
    f.raw_rtt_us = Median(rttv) * 1e6;
  }
  return f;
}

Figures RunRing(int n) {
  // Every rank's ring socket, and rank 1's raw one, listen before any rank
  // starts: rank 0's here, the others' handed to their processes.
  std::vector<std::string> eps;
  std::vector<HandedSocket> sockets;
  eps.push_back(ReservedEndpoint());
  for (int r = 1; r < n; ++r) {
    sockets.push_back(ListenForChild());
    eps.push_back(sockets.back().endpoint());
  }
  const HandedSocket raw = ListenForChild();
  const int raw_port = raw.port;
  std::vector<pid_t> pids;
  for (int r = 1; r < n; ++r) {
    std::vector<int> handed = {sockets[static_cast<size_t>(r - 1)].fd};
    if (r == 1) handed.push_back(raw.fd);
    const pid_t pid = SpawnHanding({"/proc/self/exe", "--role=rank", absl::StrCat("--rank=", r),
                                    "--endpoints=" + absl::StrJoin(eps, ","), absl::StrCat("--raw_port=", raw_port)},
                                   handed);
    CHECK_GT(pid, 0) << "could not start rank " << r;
    pids.push_back(pid);
  }
  if (n < 2) ::close(raw.fd);
  Figures f = RunRank(0, eps, raw_port);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  return f;
}

// Runs the Gloo peer script (PyTorch's all_reduce, 2 processes) at 4 and
// 64 MiB and prints its bus bandwidth beside the 2-rank ring's. The script
// prints one "RESULT <json>" line per size.
void PrintGloo(const Figures& ours) {
  if (FLAGS_gloo_script.empty() || std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    std::printf("PyTorch Gloo: not measured (torch does not import here; see ../shared/peers/ to install it)\n");
    return;
  }
  const Result r = RunCommand("python3 " + FLAGS_gloo_script + " allreduce --iters 20 --warmup 3 --sizes 4M,64M");
  std::map<double, double> busbw;  // size in bytes -> GB/s
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "RESULT ")) continue;
    google::protobuf::Struct row;
    if (!google::protobuf::util::JsonStringToMessage(std::string(line), &row).ok()) continue;
    const auto& f = row.fields();
    if (f.count("size_bytes") && f.count("busbw_GBps")) {
      busbw[f.at("size_bytes").number_value()] = f.at("busbw_GBps").number_value();
    }
  }
  const double g4 = busbw[4.0 * kMiB], g64 = busbw[64.0 * kMiB];
  if (r.code != 0 || g4 <= 0 || g64 <= 0) {
    std::printf("PyTorch Gloo: the peer script failed (exit %d): %s\n", r.code, r.out.c_str());
    return;
  }
  std::printf(
      "PyTorch Gloo all_reduce, 2 processes, same host: bus bandwidth 4 MiB %.2f GB/s, 64 MiB %.2f GB/s; "
      "the ring's -> %.2fx / %.2fx (target >= 1.00x)\n",
      g4, g64, ours.ring4_busbw / g4, ours.ring64_busbw / g64);
}

int Main() {
  std::printf("collective_bench: TCP ring on loopback, and shared memory, fp32; this host has %u cores\n",
              std::thread::hardware_concurrency());
  Figures two_ranks;
  for (int n : {2, 4}) {
    const Figures f = RunRing(n);
    if (n == 2) two_ranks = f;
    std::printf(
        "ring %d processes: all-reduce bus bandwidth 4 MiB %.2f GB/s, 64 MiB %.2f GB/s; raw TCP stream "
        "%.2f GB/s -> %.2fx / %.2fx (target >= 0.70x)\n",
        n, f.ring4_busbw, f.ring64_busbw, f.raw_gbps, f.ring4_busbw / f.raw_gbps, f.ring64_busbw / f.raw_gbps);
    std::printf(
        "ring %d processes: for scale, ranks 0 and 1 sending 64 MiB to each other at once (raw TCP, "
        "each way) %.2f GB/s -> %.2fx / %.2fx\n",
        n, f.duplex_gbps, f.ring4_busbw / f.duplex_gbps, f.ring64_busbw / f.duplex_gbps);
    if (n == 2) {
      std::printf(
          "ring 2 processes: 4-byte all-reduce %.1f us, raw TCP round trip %.1f us -> %.2fx (target <= 2.00x)\n",
          f.tiny_us, f.raw_rtt_us, f.tiny_us / f.raw_rtt_us);
    }
    // Like with like: shared memory's all-reduce is made of copies through
    // memory, so its baseline is a memcpy in the same run, not a socket.
    std::printf(
        "shm %d processes: all-reduce bus bandwidth 4 MiB %.2f GB/s, 64 MiB %.2f GB/s; memcpy of 64 MiB "
        "%.2f GB/s -> %.2fx / %.2fx of memcpy\n",
        n, f.shm4_busbw, f.shm64_busbw, f.memcpy_gbps, f.shm4_busbw / f.memcpy_gbps, f.shm64_busbw / f.memcpy_gbps);
    if (n == 2) {
      std::printf("shm 2 processes: 4-byte all-reduce %.1f us, raw TCP round trip %.1f us -> %.2fx (target <= 2.00x)\n",
                  f.shm_tiny_us, f.raw_rtt_us, f.shm_tiny_us / f.raw_rtt_us);
    }
  }
  PrintGloo(two_ranks);
  if (!FLAGS_training) return 0;
  const std::string model = "--model fashion_mlp --batch_size 256 --epochs 2 --seed 3";  // 470 steps: past warm-up
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  // Interleaved rounds, medians: this host's speed drifts within minutes.
  const std::vector<std::string> jobs = {"launch --mode nccl2 --trainers 1 ", "launch --mode nccl2 --trainers 2 ",
                                         "launch --mode nccl2 --trainers 2 --collective_transport=tcp ",
                                         "launch --pservers 2 --trainers 2 "};
  std::vector<std::vector<double>> rates(jobs.size() + 1);
  // The ceiling: two 1-trainer jobs of batch 128 side by side, no exchange
  // between them — what 2 trainers of half the batch could reach on these
  // cores if the all-reduce cost nothing.
  const std::string half = "--model fashion_mlp --batch_size 128 --epochs 2 --seed 3";
  const std::string pair =
      absl::StrCat("(", OarBinary(), " launch --mode nccl2 --trainers 1 ", half, " > /tmp/oar_ceiling_a.out 2>&1 & ",
                   OarBinary(), " launch --mode nccl2 --trainers 1 ", half,
                   " > /tmp/oar_ceiling_b.out 2>&1; wait); cat /tmp/oar_ceiling_a.out; echo ===; "
                   "cat /tmp/oar_ceiling_b.out");
  for (int round = 0; round < FLAGS_launch_rounds; ++round) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      const Result r = Oar(jobs[j] + model);
      CHECK_EQ(r.code, 0) << r.out;
      rates[j].push_back(LaunchExamplesPerSecond(r.out));
    }
    const Result both = RunCommand(pair);
    const size_t cut = both.out.find("\n===\n");
    CHECK_NE(cut, std::string::npos) << both.out;
    rates[jobs.size()].push_back(LaunchExamplesPerSecond(both.out.substr(0, cut)) +
                                 LaunchExamplesPerSecond(both.out.substr(cut)));
  }
  const double e1 = Median(rates[0]), e2 = Median(rates[1]), e2tcp = Median(rates[2]), eps2 = Median(rates[3]);
  const double ceiling = Median(rates[jobs.size()]);
  std::printf(
      "fashion_mlp, global batch 256, 1 BLAS thread each, medians of %d rounds: nccl2 2 trainers %.0f "
      "examples/s (shared memory; TCP ring %.0f), 1 trainer %.0f -> %.2fx (ring %.2fx; target >= 1.60x); "
      "2 pservers x 2 trainers %.0f -> %.2fx (ring %.2fx; target >= 1.00x)\n",
      FLAGS_launch_rounds, e2, e2tcp, e1, e2 / e1, e2tcp / e1, eps2, e2 / eps2, e2tcp / eps2);
  std::printf(
      "  ceiling: two 1-trainer jobs of batch 128 side by side (no exchange) %.0f examples/s -> %.2fx of 1 trainer "
      "at 256; nccl2 2 trainers reach %.2f of it (ring %.2f)\n",
      ceiling, ceiling / e1, e2 / ceiling, e2tcp / ceiling);
  return 0;
}

}  // namespace
}  // namespace oar::bench

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // before anything loads: see blas_core.h
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_role == "rank") {
    CHECK(oar::AdoptInheritedListenSockets().ok());  // its ring socket (and rank 1's raw one), from rank 0
    oar::bench::RunRank(FLAGS_rank, absl::StrSplit(FLAGS_endpoints, ','), FLAGS_raw_port);
    return 0;
  }
  return oar::bench::Main();
}
