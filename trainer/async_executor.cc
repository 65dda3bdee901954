#include "trainer/async_executor.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/data/multi_slot_feed.h"
#include "common/framework/executor.h"
#include "common/framework/prepared_block.h"

namespace oar {

std::string FormatFetched(const std::vector<std::string>& names, const std::vector<Tensor>& values) {
  std::vector<std::string> parts;
  for (size_t k = 0; k < names.size() && k < values.size(); ++k) {
    const Tensor& t = values[k];
    std::vector<std::string> shown;
    const int64_t n = t.initialized() ? t.numel() : 0;
    for (int64_t i = 0; i < std::min<int64_t>(n, 4); ++i) {
      switch (t.dtype()) {
        case DataType::kFloat32:
          shown.push_back(absl::StrCat(t.data<float>()[i]));
          break;
        case DataType::kFloat64:
          shown.push_back(absl::StrCat(t.data<double>()[i]));
          break;
        case DataType::kInt64:
          shown.push_back(absl::StrCat(t.data<int64_t>()[i]));
          break;
        case DataType::kInt32:
          shown.push_back(absl::StrCat(t.data<int32_t>()[i]));
          break;
        default:
          shown.push_back("?");
      }
    }
    if (n == 1) {
      parts.push_back(absl::StrCat(names[k], "=", shown[0]));
    } else {
      parts.push_back(absl::StrCat(names[k], "=[", absl::StrJoin(shown, " "), n > 4 ? " ..." : "", "] (", n, ")"));
    }
  }
  return absl::StrJoin(parts, " ");
}

namespace {

// The instances in one batch: a sparse slot's sequences, or a dense slot's rows.
int64_t ExamplesIn(const std::vector<Tensor>& batch) {
  if (batch.empty()) return 0;
  const Tensor& t = batch[0];
  if (!t.lod().empty()) return static_cast<int64_t>(t.lod()[0].size()) - 1;
  return t.dims().size() > 0 ? t.dims()[0] : 0;
}

absl::Status CheckNames(const ProgramDesc& program, const DataFeedDesc& feed, const std::vector<std::string>& fetch) {
  const BlockDesc& block = program.Block(0);
  for (int i : feed.used_slots()) {
    const std::string& name = feed.proto().multi_slot_desc().slots(i).name();
    if (block.FindVar(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the data feed's slot '", name,
                       "' is not a variable of the program (slots feed the variables "
                       "of the same names; leave it out with set_use_slots, or name it as the program does)"));
    }
  }
  for (const std::string& name : fetch) {
    if (block.FindVar(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("fetch target '", name, "' is not a variable of the program"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AsyncRunResult> AsyncExecutor::Run(const ProgramDesc& program, const DataFeedDesc& feed,
                                                  const std::vector<std::string>& filelist, int thread_num,
                                                  const std::vector<std::string>& fetch, AsyncRunOptions options) {
  if (thread_num < 1)
    return absl::InvalidArgumentError(absl::StrCat("thread_num (--threads) is ", thread_num, "; it must be >= 1"));
  if (filelist.empty()) return absl::InvalidArgumentError("AsyncExecutor: the file list is empty");
  OAR_RETURN_IF_ERROR(CheckNames(program, feed, fetch));
  const int threads = std::min<int>(thread_num, static_cast<int>(filelist.size()));
  FileQueue files(filelist);
  FeedStats stats;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> batches{0};
  absl::Mutex mu;  // guards first_error, newest, result.last, bind and printing
  absl::Status first_error;
  int64_t newest = 0;
  AsyncRunResult result;
  result.threads = threads;
  auto work = [&](int t) -> absl::Status {
    Executor exe(place_, ExecutorOptions{.env = env_});
    OAR_ASSIGN_OR_RETURN(std::unique_ptr<PreparedBlock> block, exe.Prepare(program, 0));
    Scope& mine = root_->NewScope();
    struct Drop {
      Scope* root;
      Scope* kid;
      PreparedBlock* block;
      ~Drop() {
        block->Unbind();
        root->DeleteScope(kid);
      }
    } drop{root_, &mine, block.get()};
    {
      absl::MutexLock l(&mu);  // persistables are found (or made) in the shared root one thread at a time
      OAR_RETURN_IF_ERROR(block->Bind(root_, &mine));
    }
    MultiSlotDataFeed reader(feed, &files, &stats, {.skip_bad_lines = options.skip_bad_lines});
    std::vector<Tensor> batch;
    std::vector<Tensor> fetched(fetch.size());
    auto fetch_now = [&] {
      for (size_t k = 0; k < fetch.size(); ++k) fetched[k] = mine.FindVar(fetch[k])->Get<Tensor>();
    };
    int64_t my_last = 0;  // the number of this thread's newest batch
    while (!stop.load()) {
      OAR_ASSIGN_OR_RETURN(bool more, reader.Next(&batch));
      if (!more) break;
      for (size_t k = 0; k < batch.size(); ++k)
        mine.FindVar(reader.names()[k])->GetMutable<Tensor>()->ShareDataWith(batch[k]);
      OAR_RETURN_IF_ERROR(block->Run());
      my_last = batches.fetch_add(1) + 1;
      if (options.debug || options.on_batch) {
        fetch_now();
        absl::MutexLock l(&mu);
        if (options.debug) {
          std::fprintf(options.out, "batch %lld thread %d: %s\n", static_cast<long long>(my_last), t,
                       FormatFetched(fetch, fetched).c_str());
        }
        if (options.on_batch) options.on_batch(ExamplesIn(batch), fetched);
      }
    }
    // The thread that ran the run's newest batch leaves its values as the
    // run's last (copied once, before its scope goes).
    fetch_now();
    absl::MutexLock l(&mu);
    if (my_last > 0 && my_last >= newest) {
      newest = my_last;
      result.last.clear();
      for (const Tensor& f : fetched) {
        Tensor copy;
        if (f.initialized()) copy.CopyFrom(f);
        result.last.push_back(std::move(copy));
      }
    }
    return absl::OkStatus();
  };
  if (options.on_start) options.on_start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      absl::Status s = work(t);
      if (options.on_thread_done) options.on_thread_done();
      if (s.ok()) return;
      stop.store(true);
      absl::MutexLock l(&mu);
      if (first_error.ok()) first_error = Annotate(s, absl::StrCat("AsyncExecutor thread ", t));
    });
  }
  for (auto& th : pool) th.join();
  if (!first_error.ok()) return first_error;
  result.batches = batches.load();
  result.instances = stats.instances.load();
  result.bad_lines = stats.bad_lines.load();
  result.first_bad_line = stats.first_bad_line();
  std::fprintf(options.out, "%s\n", FormatFetched(fetch, result.last).c_str());
  return result;
}

}  // namespace oar
