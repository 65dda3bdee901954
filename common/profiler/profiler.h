// Profiler: timed spans (ops, RPC handling) recorded by the threads of one
// process, reported as Fluid's profiler table and written as a Chrome trace
// (the trace event format that chrome://tracing and Perfetto open, and that
// Fluid's tools/timeline.py produced).
//
//   Profiler prof;
//   RunEnv env{...}; env.profiler = &prof;        // executors time every op they run
//   ... train ...
//   std::cout << prof.Report(Profiler::SortedKey::kTotal);
//   prof.WriteTrace("trace.json", "trainer 0");
//
// A span's clock is wall time in microseconds since the Unix epoch, so the
// traces of several processes on one host line up when merged
// (MergeTraces, oar launch --timeline).
//
// Nothing is recorded where no Profiler is given: the executors check a
// pointer per op.
//
// Thread-safety: Record is safe for concurrent use (each thread appends to
// its own buffer); Report, Events and WriteTrace may run concurrently with
// Record and see the spans recorded so far.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace oar {

class Profiler {
 public:
  struct Event {
    std::string name;      // an op's type ("mul", "send"), or "rpc:GetVariable", ...
    std::string category;  // "op", "rpc"
    int64_t start_us = 0;  // since the Unix epoch
    int64_t dur_us = 0;
    int tid = 0;  // the recording thread, numbered from 0 in order of first record
  };

  // Fluid's sorted_key: the table's order (descending; by name for kNone).
  enum class SortedKey { kNone, kCalls, kTotal, kMax, kMin, kAve };
  // "calls", "total", "max", "min", "ave" or "" / "default" (Fluid's names);
  // InvalidArgument naming the value otherwise.
  static absl::Status ParseSortedKey(const std::string& s, SortedKey* key);

  Profiler();
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void Record(const std::string& name, const char* category, absl::Time start, absl::Time end);

  std::vector<Event> Events() const;
  // Fluid's report: one row per span name with Calls, Total, Min., Max.,
  // Ave. (ms) and Ratio (of the total of all rows), and a header line.
  std::string Report(SortedKey key) const;
  // The sum of every span's duration, in seconds.
  double TotalSeconds() const;

  // {"traceEvents": [...]}: a complete ("X") event per span with this
  // process's `pid` and a process_name metadata event naming the lane.
  std::string TraceJson(const std::string& process_name, int pid = 0) const;
  // TraceJson to `path` (to a temporary name, then renamed); errors name it.
  absl::Status WriteTrace(const std::string& path, const std::string& process_name) const;

 private:
  struct ThreadBuffer;
  ThreadBuffer* BufferForThisThread();

  const uint64_t id_;  // tells this profiler's thread-local buffers from others'
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_ ABSL_GUARDED_BY(mu_);
};

// Merges Chrome traces (files written by WriteTrace) into one, each input
// its own process lane: pid = its index, and its process_name kept. Errors
// name the file that is missing or is not a trace.
absl::Status MergeTraces(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace oar
