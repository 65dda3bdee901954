#include "common/metrics/metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace oar::metrics {
namespace {

bool ValidName(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// A sample value: integers as integers, the rest to 10 significant digits.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.10g", v);
}

// Label values escape backslash, double quote and newline; help text
// backslash and newline (the exposition format's rules).
std::string Escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// {a="x",b="y"} plus an extra label (le="..."), or "" when there are none.
std::string Labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"", Escape(values[i], true), "\"");
  }
  if (!extra_name.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
  return out.empty() ? "" : absl::StrCat("{", out, "}");
}

void Header(std::string* out, const std::string& name, const std::string& help, const char* type) {
  absl::StrAppend(out, "# HELP ", name, " ", Escape(help, false), "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_->size() && v > (*bounds_)[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::BucketCounts() const {
  std::vector<uint64_t> c(bounds_->size() + 1);
  for (size_t i = 0; i < c.size(); ++i) c[i] = buckets_[i].load(std::memory_order_relaxed);
  return c;
}

const std::vector<double>& DefaultSecondsBuckets() {
  static const auto* b = new std::vector<double>{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                 0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return *b;
}

template <typename T>
T* Family<T>::With(const std::vector<std::string>& values) {
  std::vector<std::string> key = values;
  key.resize(labels_.size());
  absl::MutexLock l(&mu_);
  auto& child = children_[key];
  if (child == nullptr) {
    if constexpr (std::is_same_v<T, Histogram>) {
      child = std::make_unique<Histogram>(&bounds_);
    } else {
      child = std::make_unique<T>();
    }
  }
  return child.get();
}

template <typename T>
void Family<T>::ForEach(const std::function<void(const std::vector<std::string>&, const T&)>& fn) const {
  absl::MutexLock l(&mu_);
  for (const auto& [labels, child] : children_) fn(labels, *child);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry::Entry* Registry::Find(const std::string& name, Type type) {
  CHECK(ValidName(name)) << "metric name '" << name << "' is not a Prometheus name";
  for (auto& [n, e] : entries_) {
    if (n != name) continue;
    CHECK(e->type == type) << "metric '" << name << "' registered twice with different types";
    return e.get();
  }
  entries_.emplace_back(name, std::make_unique<Entry>());
  Entry* e = entries_.back().second.get();
  e->type = type;
  return e;
}

Family<Counter>* Registry::AddCounter(const std::string& name, const std::string& help,
                                      const std::vector<std::string>& labels) {
  for (const auto& l : labels) CHECK(ValidName(l) && l != "le") << "label '" << l << "' of " << name;
  absl::MutexLock l(&mu_);
  Entry* e = Find(name, Type::kCounter);
  CHECK(!e->read) << "metric '" << name << "' is a callback";
  if (e->counter == nullptr) e->counter = std::make_unique<Family<Counter>>(name, help, labels);
  return e->counter.get();
}

Family<Gauge>* Registry::AddGauge(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& labels) {
  for (const auto& l : labels) CHECK(ValidName(l) && l != "le") << "label '" << l << "' of " << name;
  absl::MutexLock l(&mu_);
  Entry* e = Find(name, Type::kGauge);
  CHECK(!e->read) << "metric '" << name << "' is a callback";
  if (e->gauge == nullptr) e->gauge = std::make_unique<Family<Gauge>>(name, help, labels);
  return e->gauge.get();
}

Family<Histogram>* Registry::AddHistogram(const std::string& name, const std::string& help,
                                          const std::vector<std::string>& labels, const std::vector<double>& bounds) {
  for (const auto& l : labels) CHECK(ValidName(l) && l != "le") << "label '" << l << "' of " << name;
  for (size_t i = 1; i < bounds.size(); ++i) CHECK_LT(bounds[i - 1], bounds[i]) << "buckets of " << name;
  absl::MutexLock l(&mu_);
  Entry* e = Find(name, Type::kHistogram);
  if (e->histogram == nullptr) e->histogram = std::make_unique<Family<Histogram>>(name, help, labels, bounds);
  return e->histogram.get();
}

void Registry::AddCallback(const std::string& name, const std::string& help, Type type, std::function<double()> fn) {
  CHECK(type != Type::kHistogram) << "callback metric '" << name << "' must be a counter or a gauge";
  absl::MutexLock l(&mu_);
  Entry* e = Find(name, type);
  CHECK(e->gauge == nullptr && e->counter == nullptr) << "metric '" << name << "' already has children";
  e->help = help;
  e->read = std::move(fn);
}

void Registry::RemoveCallback(const std::string& name) {
  absl::MutexLock l(&mu_);
  for (auto& [n, e] : entries_) {
    if (n == name) e->read = nullptr;
  }
}

std::string Registry::Render() const {
  std::string out;
  absl::MutexLock l(&mu_);
  for (const auto& entry : entries_) {
    // Not a structured binding: clang before 16 cannot capture one in the
    // lambdas below (the fuzz and sanitizer builds use clang 14).
    const std::string& name = entry.first;
    const auto& e = entry.second;
    switch (e->type) {
      case Type::kCounter:
        if (e->read) {
          Header(&out, name, e->help, "counter");
          absl::StrAppend(&out, name, " ", Number(e->read()), "\n");
          break;
        }
        if (e->counter == nullptr) break;
        Header(&out, name, e->counter->help(), "counter");
        e->counter->ForEach([&](const std::vector<std::string>& lv, const Counter& c) {
          absl::StrAppend(&out, name, Labels(e->counter->labels(), lv), " ", Number(c.Value()), "\n");
        });
        break;
      case Type::kGauge:
        if (e->read) {
          Header(&out, name, e->help, "gauge");
          absl::StrAppend(&out, name, " ", Number(e->read()), "\n");
        } else if (e->gauge != nullptr) {
          Header(&out, name, e->gauge->help(), "gauge");
          e->gauge->ForEach([&](const std::vector<std::string>& lv, const Gauge& g) {
            absl::StrAppend(&out, name, Labels(e->gauge->labels(), lv), " ", Number(g.Value()), "\n");
          });
        }
        break;
      case Type::kHistogram: {
        const Family<Histogram>& f = *e->histogram;
        Header(&out, name, f.help(), "histogram");
        f.ForEach([&](const std::vector<std::string>& lv, const Histogram& h) {
          const std::vector<uint64_t> counts = h.BucketCounts();
          uint64_t cumulative = 0;
          for (size_t i = 0; i < counts.size(); ++i) {
            cumulative += counts[i];
            const std::string le = i < h.bounds().size() ? Number(h.bounds()[i]) : "+Inf";
            absl::StrAppend(&out, name, "_bucket", Labels(f.labels(), lv, "le", le), " ", cumulative, "\n");
          }
          // _count from the buckets read above, so it equals the +Inf bucket.
          absl::StrAppend(&out, name, "_sum", Labels(f.labels(), lv), " ", Number(h.Sum()), "\n");
          absl::StrAppend(&out, name, "_count", Labels(f.labels(), lv), " ", cumulative, "\n");
        });
        break;
      }
    }
  }
  return out;
}

Registry& Default() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace oar::metrics
