// Communicator: Fluid 1.5+'s background sender for async pserver training
// (the trainer program of `sync_mode=False, runtime_split_send_recv=True`).
// A send op hands it a copy of its gradient and returns; a queue per
// variable (at most `send_queue_size` values: a full queue makes the send
// op wait — backpressure — up to the RPC deadline) holds them until the
// send thread takes up to `max_merge_var_num` of a variable's values,
// merges them (summed for an SGD pserver, else averaged; sparse ones row by
// row, MergeGrads) and sends the result from a pool of `thread_pool_size`
// threads, cut into its blocks. A recv thread pulls every parameter once
// `min_send_grad_num_before_recv` merged gradients have gone (or, without
// `independent_recv_thread`, the send thread after each round) into a
// staging copy; the program's recv op (which in Fluid's communicator mode
// does nothing) installs the newest copy, so a parameter changes only
// between the ops of a step, never under one.
//
//   OAR_ASSIGN_OR_RETURN(auto comm, Communicator::Create(trainer_program, &client, options));
//   RunEnv env = rpc::ClientEnv(&client);
//   env.communicator = comm.get();          // the send and recv ops use it
//   comm->Start();
//   ... run the program, any number of threads ...
//   OAR_RETURN_IF_ERROR(comm->Stop());      // sends what is queued, pulls the parameters once more
//   OAR_RETURN_IF_ERROR(comm->InstallReceived(&scope));
//
// Half-async (Fluid 1.7+'s HalfAsyncCommunicator, `half_async`): the
// program's send_barrier(half_async=true) parks each training thread in
// Barrier(); once all `threads` are there, the send thread merges (by mean)
// what they queued, sends it, pulls every parameter into the scope given to
// Start while they are parked, and releases them. A thread that ends says
// ThreadDone, so the others are not kept waiting for it.
//
// Nothing queued is dropped: Stop sends every queued gradient (merged)
// before it returns. A failed send or pull fails the next Send, recv and
// Stop with its reason (the trainer then stops the job as any failure).
//
// Thread-safety: Send and TakeReceived may be called from any number of
// threads; Start, Stop and InstallReceived from the owner's. Lock order:
// the queue lock, then (never the other way) nothing: RPCs run without it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/thread_pool.h"
#include "common/framework/scope.h"
#include "trainer/communicator_context.h"

namespace oar {
namespace rpc {
class RpcClient;
}

// Fluid's FLAGS_communicator_* (cli/ reads them), with Fluid's defaults.
struct CommunicatorOptions {
  int send_queue_size = 20;                        // values queued per variable
  int max_merge_var_num = 20;                      // values merged into one send
  int send_wait_times = 5;                         // 10 ms waits for more values before a send goes
  int thread_pool_size = 5;                        // threads sending merged values
  bool independent_recv_thread = true;             // pull on a thread of its own
  int min_send_grad_num_before_recv = 20;          // merged sends between pulls
  bool merge_sparse_grad = true;                   // sum a sparse gradient's repeated rows before sending
  bool is_sgd_optimizer = true;                    // merge by sum; false: by mean
  bool fake_rpc = false;                           // testing: merge but send nothing
  bool half_async = false;                         // HalfAsyncCommunicator: rounds at Barrier()
  absl::Duration queue_wait = absl::Seconds(180);  // a full queue's bound on Send (the RPC deadline)
  // Told of every merged send (the variable and how many values it merged),
  // from a pool thread, before the send: what a test replays.
  std::function<void(const std::string& var, const Variable& merged, int values)> on_merged = nullptr;
};

class Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const ProgramDesc& trainer_program,
                                                              rpc::RpcClient* client, CommunicatorOptions options = {});
  Communicator(CommunicatorContexts contexts, rpc::RpcClient* client, CommunicatorOptions options);
  ~Communicator();  // Stop()s a running communicator, its error logged
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // `params`: where half-async rounds install what they pulled (the scope
  // the training threads share); else the recv ops install it.
  void Start(Scope* params = nullptr);
  // Half-async: how many training threads meet at Barrier() (default 1).
  void SetThreads(int threads);
  // Half-async: a training thread ended; the rest meet without it.
  void ThreadDone();
  // Half-async: parks the caller until every live thread is here and the
  // round they queued was sent and the parameters pulled; bounded by
  // `queue_wait`. Asynchronous mode: returns at once.
  absl::Status Barrier();
  // Queues a copy of `value` for the send variable `name` (before Start
  // too: the sender takes it once started).
  absl::Status Send(const std::string& name, const Variable& value);
  // Copies the newest pulled value of the recv variable `name` into `*out`
  // (in place when it has the same shape and dtype) if one arrived since
  // the last take; otherwise leaves it. The first failure of a pull, if any.
  absl::Status TakeReceived(const std::string& name, Variable* out);
  // Blocks until every value queued before the call was merged, sent and
  // answered (the send thread takes what is queued without waiting for
  // more meanwhile), at most `queue_wait`; the first error of any send.
  // Half-async: rounds send at Barrier, so call it after the threads' last
  // Barrier (then it returns at once). What an elastic trainer does before
  // it reports a chunk done, so no gradient of a chunk reported done is
  // still in this process.
  absl::Status Flush();
  // Sends everything queued, stops the threads, and pulls every parameter
  // once more; the first error of any send or pull.
  absl::Status Stop();
  // Every pulled value not yet taken, into `scope`'s variables.
  absl::Status InstallReceived(Scope* scope);

  bool HasSendVar(const std::string& name) const { return contexts_.send.count(name) > 0; }
  bool HasRecvVar(const std::string& name) const { return contexts_.recv.count(name) > 0; }
  struct Counts {
    int64_t queued = 0, merged_sends = 0, pulls = 0;
  };
  Counts counts() const;

 private:
  struct Queue {
    std::deque<std::unique_ptr<Variable>> values;
  };
  // Merges and sends each of `ready` on the pool; returns when all went.
  void SendRound(const std::vector<std::string>& ready);
  void SendLoop();
  void HalfAsyncLoop();
  bool RoundDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecvLoop();
  // Takes up to max_merge_var_num values of `name`, waiting for more as
  // Fluid does; empty when none came.
  std::vector<std::unique_ptr<Variable>> TakeBatch(const std::string& name);
  absl::Status MergeAndSend(const std::string& name);
  absl::Status SendMerged(const VarContext& c, const Variable& merged);
  absl::Status PullAll();
  void Fail(const absl::Status& s);
  absl::Status error() const;

  const CommunicatorContexts contexts_;
  rpc::RpcClient* const client_;
  const CommunicatorOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, Queue> queues_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_since_pull_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t values_sent_ ABSL_GUARDED_BY(mu_) = 0;  // queued values merged into an answered send
  int flushing_ ABSL_GUARDED_BY(mu_) = 0;         // Flush calls waiting
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  // Pulled values not yet taken, by recv variable.
  std::map<std::string, std::unique_ptr<Variable>> received_ ABSL_GUARDED_BY(mu_);

  // Half-async: threads that meet, threads arrived, rounds done.
  int threads_ ABSL_GUARDED_BY(mu_) = 1;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
  Scope* params_ = nullptr;

  std::unique_ptr<ThreadPool> pool_;
  std::thread send_thread_, recv_thread_;
};

}  // namespace oar
