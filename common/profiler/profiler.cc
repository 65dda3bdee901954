#include "common/profiler/profiler.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oar {

// One thread's spans. Only its thread appends; readers copy under `mu`.
struct Profiler::ThreadBuffer {
  int tid = 0;
  absl::Mutex mu;
  std::vector<Event> events ABSL_GUARDED_BY(mu);
};

namespace {

std::atomic<uint64_t> g_next_profiler_id{1};

// This thread's buffer per profiler id: a thread may record into several
// profilers (tests run several roles in one process).
struct ThreadSlot {
  uint64_t profiler = 0;
  void* buffer = nullptr;
};
thread_local std::vector<ThreadSlot> t_slots;

}  // namespace

Profiler::Profiler() : id_(g_next_profiler_id.fetch_add(1)) {}

Profiler::~Profiler() {
  // Forget this thread's slot; other threads' slots for this id are never
  // used again (ids are not reused).
  t_slots.erase(std::remove_if(t_slots.begin(), t_slots.end(), [&](const ThreadSlot& s) { return s.profiler == id_; }),
                t_slots.end());
}

absl::Status Profiler::ParseSortedKey(const std::string& s, SortedKey* key) {
  static const std::map<std::string, SortedKey> kKeys = {{"", SortedKey::kNone},       {"default", SortedKey::kNone},
                                                         {"calls", SortedKey::kCalls}, {"total", SortedKey::kTotal},
                                                         {"max", SortedKey::kMax},     {"min", SortedKey::kMin},
                                                         {"ave", SortedKey::kAve}};
  auto it = kKeys.find(s);
  if (it == kKeys.end()) {
    return absl::InvalidArgumentError(absl::StrCat("sorted_key '", s, "' is not one of calls, total, max, min, ave"));
  }
  *key = it->second;
  return absl::OkStatus();
}

Profiler::ThreadBuffer* Profiler::BufferForThisThread() {
  for (const ThreadSlot& s : t_slots) {
    if (s.profiler == id_) return static_cast<ThreadBuffer*>(s.buffer);
  }
  absl::MutexLock l(&mu_);
  buffers_.push_back(std::make_unique<ThreadBuffer>());
  ThreadBuffer* b = buffers_.back().get();
  b->tid = static_cast<int>(buffers_.size()) - 1;
  t_slots.push_back({id_, b});
  return b;
}

void Profiler::Record(const std::string& name, const char* category, absl::Time start, absl::Time end) {
  ThreadBuffer* b = BufferForThisThread();
  Event e{name, category, absl::ToUnixMicros(start), absl::ToInt64Microseconds(end - start), b->tid};
  absl::MutexLock l(&b->mu);  // uncontended: only Events() also takes it
  b->events.push_back(std::move(e));
}

std::vector<Profiler::Event> Profiler::Events() const {
  std::vector<Event> all;
  absl::MutexLock l(&mu_);
  for (const auto& b : buffers_) {
    absl::MutexLock bl(&b->mu);
    all.insert(all.end(), b->events.begin(), b->events.end());
  }
  std::sort(all.begin(), all.end(), [](const Event& a, const Event& b) { return a.start_us < b.start_us; });
  return all;
}

double Profiler::TotalSeconds() const {
  double us = 0;
  for (const Event& e : Events()) us += static_cast<double>(e.dur_us);
  return us / 1e6;
}

std::string Profiler::Report(SortedKey key) const {
  struct Row {
    std::string name;
    int64_t calls = 0;
    double total = 0, min = std::numeric_limits<double>::max(), max = 0;  // ms
  };
  std::map<std::string, Row> rows;
  double all = 0;
  for (const Event& e : Events()) {
    Row& r = rows[e.name];
    const double ms = static_cast<double>(e.dur_us) / 1e3;
    r.name = e.name;
    ++r.calls;
    r.total += ms;
    r.min = std::min(r.min, ms);
    r.max = std::max(r.max, ms);
    all += ms;
  }
  std::vector<Row> sorted;
  for (auto& [name, r] : rows) sorted.push_back(r);
  auto value = [key](const Row& r) -> double {
    switch (key) {
      case SortedKey::kCalls:
        return static_cast<double>(r.calls);
      case SortedKey::kTotal:
        return r.total;
      case SortedKey::kMax:
        return r.max;
      case SortedKey::kMin:
        return r.min;
      case SortedKey::kAve:
        return r.total / static_cast<double>(r.calls);
      case SortedKey::kNone:
        return 0;
    }
    return 0;
  };
  if (key != SortedKey::kNone) {
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Row& a, const Row& b) { return value(a) > value(b); });
  }
  static const char* kOrder[] = {"in the order of names",
                                 "by number of calls in descending order",
                                 "by total time in descending order",
                                 "by max time in descending order",
                                 "by min time in descending order",
                                 "by average time in descending order"};
  std::string out = absl::StrCat(
      "------------------------->     Profiling Report     <-------------------------\n\n"
      "Place: CPU\nTime unit: ms\nSorted ",
      kOrder[static_cast<int>(key)], "\n\n");
  absl::StrAppendFormat(&out, "%-32s %10s %12s %12s %12s %12s %10s\n", "Event", "Calls", "Total", "Min.", "Max.",
                        "Ave.", "Ratio.");
  for (const Row& r : sorted) {
    absl::StrAppendFormat(&out, "%-32s %10d %12.4f %12.4f %12.4f %12.4f %10.6f\n", r.name, r.calls, r.total, r.min,
                          r.max, r.total / static_cast<double>(r.calls), all > 0 ? r.total / all : 0.0);
  }
  return out;
}

std::string Profiler::TraceJson(const std::string& process_name, int pid) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process_name}}}});
  for (const Event& e : Events()) {
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.start_us},
                      {"dur", e.dur_us},
                      {"pid", pid},
                      {"tid", e.tid}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

namespace {

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot rename ", tmp, " to ", path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status Profiler::WriteTrace(const std::string& path, const std::string& process_name) const {
  return WriteFileAtomically(path, TraceJson(process_name));
}

absl::Status MergeTraces(const std::vector<std::string>& inputs, const std::string& output) {
  nlohmann::json merged = nlohmann::json::array();
  for (size_t pid = 0; pid < inputs.size(); ++pid) {
    std::ifstream in(inputs[pid]);
    if (!in) return absl::NotFoundError(absl::StrCat("trace ", inputs[pid], " is missing"));
    const nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
        !trace["traceEvents"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(inputs[pid], " is not a trace ({\"traceEvents\": [...]})"));
    }
    for (nlohmann::json e : trace["traceEvents"]) {
      if (!e.is_object()) continue;
      e["pid"] = pid;
      merged.push_back(std::move(e));
    }
  }
  return WriteFileAtomically(output, nlohmann::json{{"traceEvents", merged}, {"displayTimeUnit", "ms"}}.dump());
}

}  // namespace oar
