// Timing helpers for the benchmarks. A figure and its baseline are timed in
// alternating rounds and the median of the per-round ratios is reported, so
// that drift in the machine's speed (shared hosts, frequency changes) hits
// both sides alike.
//
// Thread-safety: single-threaded use.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace oar::bench {

// Bytes per `seconds` in GB/s.
inline double GBps(size_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

struct Paired {
  double a_seconds;  // median seconds per call of `a`
  double b_seconds;  // median seconds per call of `b`
  double ratio;      // median over rounds of a/b
};

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `fn`, averaged over `iters` calls.
inline double TimeCalls(const std::function<void()>& fn, int iters) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

// Warms both up, then times `rounds` alternating rounds of `iters` calls each.
inline Paired TimePaired(const std::function<void()>& a, const std::function<void()>& b, int iters, int rounds) {
  a();
  b();
  std::vector<double> ta, tb, r;
  for (int i = 0; i < rounds; ++i) {
    ta.push_back(TimeCalls(a, iters));
    tb.push_back(TimeCalls(b, iters));
    r.push_back(ta.back() / tb.back());
  }
  return {Median(ta), Median(tb), Median(r)};
}

// The examples/s of an `oar launch` summary ("... 12345 examples/s across
// the trainers"); 0 when there is none.
inline double LaunchExamplesPerSecond(const std::string& out) {
  const size_t at = out.find(" examples/s across");
  if (at == std::string::npos) return 0;
  const size_t begin = out.find_last_of(' ', at - 1);
  return std::atof(out.substr(begin + 1, at - begin - 1).c_str());
}

}  // namespace oar::bench
