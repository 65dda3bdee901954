#include "trainer/communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/base/status.h"
#include "common/rpc/rpc_client.h"
#include "glog/logging.h"
#include "trainer/communicator_advice.h"
#include "trainer/grad_merge.h"
#include "trainer/stack_rows.h"

namespace oar {
namespace {

constexpr absl::Duration kMergeWait = absl::Milliseconds(10);  // Fluid's poll of an empty queue

absl::Status CheckOptions(const CommunicatorOptions& o) {
  const std::pair<const char*, int> at_least_one[] = {{"send_queue_size", o.send_queue_size},
                                                      {"max_merge_var_num", o.max_merge_var_num},
                                                      {"thread_pool_size", o.thread_pool_size}};
  for (const auto& [flag, value] : at_least_one) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat("FLAGS_communicator_", flag, " must be at least 1, got ", value));
    }
  }
  if (o.send_wait_times < 0 || o.min_send_grad_num_before_recv < 0) {
    return absl::InvalidArgumentError(absl::StrCat("FLAGS_communicator_send_wait_times (", o.send_wait_times,
                                                   ") and FLAGS_communicator_min_send_grad_num_before_recv (",
                                                   o.min_send_grad_num_before_recv, ") must not be negative"));
  }
  return absl::OkStatus();
}

std::unique_ptr<Variable> DeepCopy(const Variable& v) {
  auto copy = std::make_unique<Variable>();
  if (v.IsType<Tensor>()) {
    copy->GetMutable<Tensor>()->CopyFrom(v.Get<Tensor>());
  } else {
    const SelectedRows& s = v.Get<SelectedRows>();
    SelectedRows* d = copy->GetMutable<SelectedRows>();
    d->rows = s.rows;
    d->height = s.height;
    if (s.value.initialized()) d->value.CopyFrom(s.value);
  }
  return copy;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const ProgramDesc& trainer_program,
                                                                   rpc::RpcClient* client,
                                                                   CommunicatorOptions options) {
  OAR_RETURN_IF_ERROR(CheckOptions(options));
  OAR_ASSIGN_OR_RETURN(CommunicatorContexts contexts, ContextsOf(trainer_program));
  if (contexts.send.empty()) {
    return absl::InvalidArgumentError(
        "the trainer program has no send op: the communicator sends the gradients of an async pserver program "
        "(transpiled with sync_mode=false)");
  }
  for (const std::string& advice : CommunicatorAdvice(trainer_program, contexts)) LOG(WARNING) << advice;
  return std::make_unique<Communicator>(std::move(contexts), client, std::move(options));
}

Communicator::Communicator(CommunicatorContexts contexts, rpc::RpcClient* client, CommunicatorOptions options)
    : contexts_(std::move(contexts)), client_(client), options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, c] : contexts_.send) queues_[name];
}

Communicator::~Communicator() {
  bool running;
  {
    absl::MutexLock lock(&mu_);
    running = running_;
  }
  if (running) {
    const absl::Status s = Stop();
    if (!s.ok()) LOG(WARNING) << "communicator: " << s;
  }
}

void Communicator::Start(Scope* params) {
  absl::MutexLock lock(&mu_);
  if (running_) return;
  running_ = true;
  stopping_ = false;
  params_ = params;
  pool_ = std::make_unique<ThreadPool>(options_.thread_pool_size);
  if (options_.half_async) {
    send_thread_ = std::thread([this] { HalfAsyncLoop(); });
    return;
  }
  send_thread_ = std::thread([this] { SendLoop(); });
  if (options_.independent_recv_thread && !contexts_.recv.empty()) recv_thread_ = std::thread([this] { RecvLoop(); });
}

absl::Status Communicator::Send(const std::string& name, const Variable& value) {
  if (!HasSendVar(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator: '", name, "' is not a variable a send op of its program sends"));
  }
  if (!value.IsType<Tensor>() && !value.IsType<SelectedRows>()) {
    return absl::InvalidArgumentError(absl::StrCat("communicator: '", name, "' is neither a tensor nor SelectedRows"));
  }
  std::unique_ptr<Variable> copy = DeepCopy(value);  // outside the lock
  absl::MutexLock lock(&mu_);
  Queue& q = queues_[name];
  const size_t cap = static_cast<size_t>(options_.send_queue_size);
  auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return q.values.size() < cap || !error_.ok() || stopping_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&room), options_.queue_wait)) {
    return absl::DeadlineExceededError(absl::StrCat("communicator: the send queue of '", name, "' stayed full (", cap,
                                                    " values, FLAGS_communicator_send_queue_size)", " for ",
                                                    absl::FormatDuration(options_.queue_wait),
                                                    ": the pservers take its gradients slower than this trainer "
                                                    "computes them, or stopped answering"));
  }
  OAR_RETURN_IF_ERROR(error_);
  if (stopping_) return absl::FailedPreconditionError(absl::StrCat("communicator: '", name, "' sent after Stop"));
  q.values.push_back(std::move(copy));
  ++counts_.queued;
  return absl::OkStatus();
}

std::vector<std::unique_ptr<Variable>> Communicator::TakeBatch(const std::string& name) {
  std::vector<std::unique_ptr<Variable>> batch;
  absl::MutexLock lock(&mu_);
  Queue& q = queues_[name];
  auto more = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !q.values.empty() || stopping_ || !error_.ok(); };
  int waits = 0;
  while (batch.size() < static_cast<size_t>(options_.max_merge_var_num)) {
    if (!q.values.empty()) {
      batch.push_back(std::move(q.values.front()));
      q.values.pop_front();
      waits = 0;
      continue;
    }
    if (stopping_ || flushing_ > 0 || !error_.ok() || options_.half_async || waits >= options_.send_wait_times) break;
    mu_.AwaitWithTimeout(absl::Condition(&more), kMergeWait);
    ++waits;
  }
  return batch;
}

absl::Status Communicator::MergeAndSend(const std::string& name) {
  std::vector<std::unique_ptr<Variable>> batch = TakeBatch(name);
  if (batch.empty()) return absl::OkStatus();
  const VarContext& c = contexts_.send.at(name);
  std::vector<const Variable*> values;
  for (const auto& v : batch) values.push_back(v.get());
  OAR_ASSIGN_OR_RETURN(Variable merged,
                       MergeGrads(name, values,
                                  {.average = options_.half_async || (!options_.is_sgd_optimizer && !c.merge_add),
                                   .merge_rows = options_.merge_sparse_grad}));
  if (options_.on_merged) options_.on_merged(name, merged, static_cast<int>(values.size()));
  if (!options_.fake_rpc) OAR_RETURN_IF_ERROR(SendMerged(c, merged));
  absl::MutexLock lock(&mu_);
  ++counts_.merged_sends;
  values_sent_ += static_cast<int64_t>(values.size());
  // As Fluid, the values taken of the first variable count the steps
  // between pulls.
  if (name == contexts_.send.begin()->first) sent_since_pull_ += static_cast<int64_t>(values.size());
  return absl::OkStatus();
}

absl::Status Communicator::SendMerged(const VarContext& c, const Variable& merged) {
  std::vector<Variable> parts(c.blocks.size());
  std::vector<std::shared_ptr<rpc::RpcCall>> calls;
  if (c.sections.empty()) {
    calls.push_back(client_->AsyncSendVar(c.epmap[0], c.blocks[0], &merged, {.trainer_id = c.trainer_id}));
  } else {
    OAR_ASSIGN_OR_RETURN(parts, SplitByRows(merged, c.sections, absl::StrCat("communicator: '", c.name, "'")));
    for (size_t i = 0; i < c.blocks.size(); ++i) {
      calls.push_back(client_->AsyncSendVar(c.epmap[i], c.blocks[i], &parts[i], {.trainer_id = c.trainer_id}));
    }
  }
  return Annotate(rpc::WaitAll(calls), absl::StrCat("communicator: sending '", c.name, "'"));
}

void Communicator::SendRound(const std::vector<std::string>& ready) {
  absl::BlockingCounter done(static_cast<int>(ready.size()));
  for (const std::string& name : ready) {
    pool_->Schedule([this, &name, &done] {
      const absl::Status s = MergeAndSend(name);
      if (!s.ok()) Fail(s);
      done.DecrementCount();
    });
  }
  done.Wait();
}

void Communicator::SendLoop() {
  auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_ || !error_.ok()) return true;
    for (const auto& [name, q] : queues_) {
      if (!q.values.empty()) return true;
    }
    return false;
  };
  while (true) {
    std::vector<std::string> ready;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&work));
      if (!error_.ok()) break;
      for (const auto& [name, q] : queues_) {
        if (!q.values.empty()) ready.push_back(name);
      }
      if (ready.empty()) break;  // stopping, and nothing left
    }
    SendRound(ready);
    if (!options_.independent_recv_thread && !contexts_.recv.empty()) {
      const absl::Status s = PullAll();
      if (!s.ok()) Fail(s);
    }
  }
}

void Communicator::Fail(const absl::Status& s) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = s;
}

absl::Status Communicator::error() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

absl::Status Communicator::Flush() {
  absl::MutexLock lock(&mu_);
  const int64_t target = counts_.queued;
  if (!running_ && values_sent_ < target) {
    return absl::FailedPreconditionError(
        absl::StrCat("communicator: ", target - values_sent_, " queued value(s) and no send thread: Start it first"));
  }
  ++flushing_;
  auto sent = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return values_sent_ >= target || !error_.ok(); };
  const bool in_time = mu_.AwaitWithTimeout(absl::Condition(&sent), options_.queue_wait);
  --flushing_;
  OAR_RETURN_IF_ERROR(error_);
  if (!in_time) {
    return absl::DeadlineExceededError(
        absl::StrCat("communicator: ", target - values_sent_, " queued gradient value(s) were not sent within ",
                     absl::FormatDuration(options_.queue_wait), ": the pservers stopped answering"));
  }
  return absl::OkStatus();
}

absl::Status Communicator::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return error_;
    stopping_ = true;
  }
  if (recv_thread_.joinable()) recv_thread_.join();
  if (send_thread_.joinable()) send_thread_.join();  // it drains every queue first
  pool_.reset();
  {
    absl::MutexLock lock(&mu_);
    running_ = false;
    if (!error_.ok()) return error_;
  }
  if (!contexts_.recv.empty()) OAR_RETURN_IF_ERROR(PullAll());
  return error();
}

Communicator::Counts Communicator::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace oar
