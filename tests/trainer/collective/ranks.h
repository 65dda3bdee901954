// The harness of the Collective tests: N ranks as threads of this process
// over one backend — the TCP ring on fresh loopback ports, shared memory
// joined over that ring (default slots, or slots small enough that every
// operation takes many rounds), or the in-process group — and the values
// they reduce.
//
// Thread-safety: test-only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/listen_socket.h"
#include "trainer/collective/inprocess_collective.h"
#include "trainer/collective/shm_collective.h"
#include "trainer/collective/tcp_ring.h"

namespace oar::testing {

enum class Backend { kRing, kInProcess, kShm, kShmSmallSlots };

inline std::string BackendName(Backend b) {
  switch (b) {
    case Backend::kRing:
      return "Ring";
    case Backend::kInProcess:
      return "InProcess";
    case Backend::kShm:
      return "Shm";
    case Backend::kShmSmallSlots:
      return "ShmSmallSlots";
  }
  return "?";
}

inline bool OverRing(Backend b) { return b != Backend::kInProcess; }

// The rings of n ranks made on n threads, each on an endpoint that listens
// already (ReservedEndpoint: no other test can take its port first).
inline std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> MakeRing(int n, absl::Duration timeout,
                                                                      const std::string& token,
                                                                      std::vector<std::string>* endpoints = nullptr) {
  std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> rings;
  std::vector<std::string> eps;
  for (int r = 0; r < n; ++r) eps.push_back(ReservedEndpoint());
  for (int r = 0; r < n; ++r) rings.emplace_back(absl::UnknownError("not made"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back(
        [&, r] { rings[r] = TcpRing::Create({.rank = r, .endpoints = eps, .token = token, .timeout = timeout}); });
  }
  for (auto& t : threads) t.join();
  if (endpoints != nullptr) *endpoints = eps;
  return rings;
}

// Runs fn(rank, collective) on n threads; returns each rank's status.
inline std::vector<absl::Status> OnRanks(Backend backend, int n,
                                         const std::function<absl::Status(int, Collective*)>& fn,
                                         absl::Duration timeout = absl::Seconds(30), const std::string& token = "job") {
  InProcessGroup group(n, timeout);
  std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> rings;
  std::vector<std::string> eps;
  if (OverRing(backend)) rings = MakeRing(n, timeout, token, &eps);
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Collective> c;
      if (OverRing(backend)) {
        if (!rings[r].ok()) {
          status[r] = rings[r].status();
          return;
        }
        c = *std::move(rings[r]);
      } else {
        c = group.Rank(r);
      }
      if (backend == Backend::kShm || backend == Backend::kShmSmallSlots) {
        ShmJoinOptions o{.transport = "shm", .timeout = timeout};
        if (backend == Backend::kShmSmallSlots) o.slot_bytes = 24 << 10;  // 100003 floats: 17 rounds, both paths
        auto shm = JoinOverSharedMemory(std::unique_ptr<TcpRing>(static_cast<TcpRing*>(c.release())), eps, o);
        if (!shm.ok()) {
          status[r] = shm.status();
          return;
        }
        if (n > 1 && (*shm)->backend() != "shm") {
          status[r] = absl::InternalError("joined over " + (*shm)->backend());
          return;
        }
        c = *std::move(shm);
      }
      status[r] = fn(r, c.get());
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

template <typename T>
Tensor Values(int rank, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<T>((rank + 1) * 3 + (i % 101) - 50);
  return MakeTensor<T>({n}, v);
}

template <typename T>
void CheckAllReduce(Backend backend, int n, int64_t count) {
  auto status = OnRanks(backend, n, [&](int r, Collective* c) -> absl::Status {
    Tensor t = Values<T>(r, count);
    if (absl::Status s = c->AllReduce(&t, "g"); !s.ok()) return s;
    for (int64_t i = 0; i < count; ++i) {
      T want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<T>((q + 1) * 3 + (i % 101) - 50);
      if (t.data<T>()[i] != want) {
        return absl::InternalError(absl::StrCat("rank ", r, " element ", i, ": ", t.data<T>()[i], " want ", want));
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << "n=" << n << " count=" << count << ": " << status[r];
}

}  // namespace oar::testing
