// Metrics in Prometheus' data model: counters, gauges and histograms, each
// in a family with a name, a help line and label names, rendered in the text
// exposition format (version 0.0.4) that Prometheus scrapes.
//
//   auto* steps = metrics::Default().AddCounter("oar_trainer_steps_total", "Training steps run");
//   steps->With({})->Add();
//   auto* rpc = metrics::Default().AddHistogram("oar_rpc_client_duration_seconds",
//                                               "RPCs, retries included", {"method", "peer"});
//   metrics::Histogram* h = rpc->With({"SendVariable", "10.0.0.1:6174"});  // keep the pointer
//   h->Observe(0.0021);
//   std::string text = metrics::Default().Render();  // what GET /metrics serves
//
// Updates are lock-free (relaxed atomics); a family's With() takes its mutex
// to find or create the labelled child, so hot paths look a child up once
// and keep the pointer (children live as long as their registry).
//
// The process-wide registry Default() is Oar's one deliberate singleton
// outside the data path: metrics describe the process, and Prometheus'
// client libraries keep a default registry the same way.
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace oar::metrics {

enum class Type { kCounter, kGauge, kHistogram };

// Only goes up (Prometheus resets it with the process).
class Counter {
 public:
  void Add(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Goes up and down; or, given a callback, reads its value at render time.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into cumulative buckets by upper bound, with their
// sum and count.
class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double v);
  // Per-bucket counts (not cumulative), the last one for +Inf.
  std::vector<uint64_t> BucketCounts() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return *bounds_; }

 private:
  const std::vector<double>* bounds_;  // owned by the family
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

// Latency buckets in seconds, 100 µs to 10 s.
const std::vector<double>& DefaultSecondsBuckets();

// One metric name and its labelled children.
template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> labels, std::vector<double> bounds = {})
      : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)), bounds_(std::move(bounds)) {}

  // The child with these label values (as many as the family has label
  // names; missing ones are ""), created on first use. Never null.
  T* With(const std::vector<std::string>& values);

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Children in label order, for rendering.
  void ForEach(const std::function<void(const std::vector<std::string>&, const T&)>& fn) const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> labels_;
  const std::vector<double> bounds_;  // histograms only
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  // Each Add returns the family of that name, creating it on first use; a
  // second Add of a name returns the first family (its help, labels and
  // buckets stand). Names and label names must be valid Prometheus names
  // ([a-zA-Z_:][a-zA-Z0-9_:]*); a bad one, or a name reused with another
  // type, is a programming error (CHECK).
  Family<Counter>* AddCounter(const std::string& name, const std::string& help,
                              const std::vector<std::string>& labels = {});
  Family<Gauge>* AddGauge(const std::string& name, const std::string& help,
                          const std::vector<std::string>& labels = {});
  Family<Histogram>* AddHistogram(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& labels = {},
                                  const std::vector<double>& bounds = DefaultSecondsBuckets());
  // A gauge (or counter) read from `fn` at render time (resident memory,
  // queue depths owned elsewhere). A second one of the same name replaces
  // the first; RemoveCallback (the owner's destructor calls it) drops it.
  void AddCallback(const std::string& name, const std::string& help, Type type, std::function<double()> fn);
  void RemoveCallback(const std::string& name);

  // Every family in the text exposition format, in registration order.
  std::string Render() const;

 private:
  struct Entry {
    Type type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
    std::string help;              // callback gauges
    std::function<double()> read;  // callback gauges
  };
  Entry* Find(const std::string& name, Type type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, std::unique_ptr<Entry>>> entries_ ABSL_GUARDED_BY(mu_);
};

// The process's registry: what `--metrics_port` serves.
Registry& Default();

}  // namespace oar::metrics
