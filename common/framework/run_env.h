// RunEnv: what ops that talk to other processes reach the network through.
// A runtime (a trainer, a pserver, a test) owns the objects, hands an
// Executor (ExecutorOptions::env) or a ParallelExecutor a RunEnv pointing at
// them, and every op they run sees it in its ExecutionContext — there is no
// process-wide client, so tests run several trainers and pservers in one
// process, each with its own transport (gRPC, in-process, fault-injecting).
//
//   rpc::GrpcTransport grpc;
//   rpc::RpcClient client(&grpc);
//   RunEnv env = rpc::ClientEnv(&client);   // rpc_client.h: rpc, transport, on_close
//   Executor exe(CPUPlace(), {.env = &env});
//
// Thread-safety: a plain struct; the objects it points at are safe for
// concurrent use and must outlive every executor given the RunEnv.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/device/place.h"
#include "common/framework/data_type.h"

namespace oar {
namespace rpc {
class RpcClient;
class Transport;
}  // namespace rpc
class Profiler;         // common/profiler/profiler.h
class Communicator;     // trainer/communicator.h
class GeoCommunicator;  // trainer/geo_communicator.h
class OpDesc;           // common/framework/program_desc.h
class Tensor;           // common/framework/tensor.h
class ThreadPool;       // common/base/thread_pool.h

// A table the pservers keep whole as row blocks (Fluid 1.5+'s remote_prefetch
// lookup tables): block i is the pserver variable table_names[i] on
// epmap[i], holding height_sections[i] consecutive rows of the table.
struct RemoteTable {
  std::vector<std::string> epmap, table_names;
  std::vector<int64_t> height_sections;
  int32_t trainer_id = 0;
};

// The trainer ids of an elastic job that are members now (their leases
// alive in etcd), and every one that ever was: one that joined and died
// between two looks is in `ever` only. `min`: the fewest trainers the job
// goes on with (--trainers MIN:MAX); fewer, live or completed, for the idle
// bound stops the job.
struct TrainerMembers {
  std::set<int> live, ever;
  int min = 1;
  std::map<int, std::string> values;  // live id -> its entry's value ("host pid N": which process)
  // Blocks until the list differs from this view or for at most the
  // duration (null: it cannot tell; the caller polls).
  std::function<void(absl::Duration)> await_change;
  // Takes trainer `id` out of the job if its live entry still holds
  // `value` (revokes its lease: every process sees it leave); null when
  // the view cannot. A pserver does so to a trainer its step waited on for
  // a whole lease without a word from it.
  std::function<absl::Status(int id, const std::string& value)> take_out;
};

// An elastic sync job: what one pserver saw of a trainer whose lease ran
// out (StepBarrier::Depart), told to the others so that all apply the same
// steps with its gradients: the step it collects, whether the trainer
// contributed to it and to the step before.
struct LeaveRecord {
  int trainer = 0;
  int64_t entry = 0;   // the step it joined at
  std::string member;  // its entry's value when it joined
  int64_t step = 0;
  bool contributed = false, contributed_before = false;
};
// Writes this pserver's record, reads every pserver's (bounded) and returns
// the last step the trainer contributed to (entry - 1: none).
using AgreeOnLeave = std::function<absl::StatusOr<int64_t>(const LeaveRecord& mine)>;

struct RunEnv {
  rpc::RpcClient* rpc = nullptr;        // send, recv, barriers, checkpoint_notify, gen_nccl_id (trainer 0)
  rpc::Transport* transport = nullptr;  // ops that serve: listen_and_serv, gen_nccl_id (other trainers)
  // What Executor::Close() does: a trainer says COMPLETE to its pservers.
  std::function<absl::Status()> on_close;
  // Told the endpoint (host:port, the port bound) a serving op —
  // listen_and_serv — listens on, before it serves; an error stops it.
  // What writes --pserver_port_file. Null: nobody is told.
  std::function<absl::Status(const std::string& endpoint)> on_serving;
  // Async pserver training with Fluid's communicator: the send ops queue
  // their gradients with it and the recv ops install what it pulled, rather
  // than calling the pservers themselves. Null: they call them.
  Communicator* communicator = nullptr;
  // GEO-SGD: the program's send op (of the sparse tables' ids) is a step of
  // it, every geo_sgd_need_push_nums-th of which exchanges the parameters.
  GeoCommunicator* geo = nullptr;
  // Where executors record each op's span (oar train --profile, oar run
  // --profile_path); null: nothing is timed.
  Profiler* profiler = nullptr;
  // Told when an executor chooses an op's kernel (once per op and dtype, not
  // every step): the op, the dtype the kernel was chosen for and the place
  // it runs on. What a tool or test reads to learn which kernels a program
  // needs (GpuCoverageTest). Null: nobody is told. It may be called from
  // several threads at once (a ParallelExecutor's).
  std::function<void(const OpDesc& op, DataType dtype, const Place& where)> on_kernel_chosen;
  // Reads rows of a RemoteTable from its pservers: `rows` becomes
  // [ids.size(), width], row k the table's row ids[k]. What a trainer's
  // lookup_table with remote_prefetch and an epmap calls; null where no
  // pserver can be asked (such a lookup is then an error).
  std::function<absl::Status(const RemoteTable& table, const std::vector<int64_t>& ids, Tensor* rows)> prefetch_rows;
  // An elastic job's async pserver (listen_and_serv): its trainers as the
  // job's member list in etcd shows them, asked while it waits for them; it
  // ends once every trainer that was a member has completed or left. Null:
  // the fixed trainers 0..Fanin-1.
  std::function<TrainerMembers()> trainer_members;
  // An elastic job's sync pserver: how it agrees with the others on a
  // departed trainer's last step (through etcd). Null in other jobs.
  AgreeOnLeave agree_on_leave;
  // Where an op may split elementwise work over a large tensor
  // (common/base/parallel_for.h): a sync pserver's optimize blocks, which
  // run while every trainer waits. Null: each op runs on its own thread.
  ThreadPool* intra_op = nullptr;
};

}  // namespace oar
