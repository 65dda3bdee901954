#include "cli/launch_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"

namespace oar::cli {
namespace {

constexpr size_t kTailLines = 20;

// "@oar progress a=1 b=x" → {a: 1, b: x}
std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    if (eq != absl::string_view::npos) out[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return out;
}

template <typename T>
T Num(const std::map<std::string, std::string>& f, const char* key) {
  T v{};
  auto it = f.find(key);
  if (it != f.end()) {
    if constexpr (std::is_floating_point_v<T>) {
      (void)absl::SimpleAtod(it->second, &v);
    } else {
      (void)absl::SimpleAtoi(it->second, &v);
    }
  }
  return v;
}

}  // namespace

LaunchMonitor::LaunchMonitor(std::vector<std::string> names, std::vector<int> trainer_of, std::string log_dir)
    : log_dir_(std::move(log_dir)), tty_(::isatty(2) == 1) {
  absl::MutexLock l(&mu_);
  names_ = std::move(names);
  trainer_of_ = std::move(trainer_of);
  tails_.resize(names_.size());
  logs_.resize(names_.size());
  reports_.resize(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    reports_[i].name = names_[i];
    reports_[i].trainer = trainer_of_[i];
  }
}

absl::Status LaunchMonitor::OpenLogLocked(size_t child) {
  if (log_dir_.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat(log_dir_, "/", names_[child], ".log");
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::PermissionDeniedError(absl::StrCat("--log_dir: ", path, ": ", std::strerror(errno)));
  logs_[child].reset(f, &std::fclose);
  return absl::OkStatus();
}

absl::Status LaunchMonitor::OpenLogs() {
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < names_.size(); ++i) OAR_RETURN_IF_ERROR(OpenLogLocked(i));
  return absl::OkStatus();
}

absl::Status LaunchMonitor::AddChild(const std::string& name, int trainer) {
  absl::MutexLock l(&mu_);
  names_.push_back(name);
  trainer_of_.push_back(trainer);
  tails_.emplace_back();
  logs_.emplace_back();
  reports_.push_back({.name = name, .trainer = trainer});
  return OpenLogLocked(names_.size() - 1);
}

void LaunchMonitor::ChildGone(size_t child) {
  absl::MutexLock l(&mu_);
  reports_[child].gone = reports_[child].result.empty();
}

void LaunchMonitor::OnLine(size_t child, const std::string& line, bool from_stdout) {
  absl::MutexLock l(&mu_);
  const int trainer = trainer_of_[child];
  if (from_stdout && trainer >= 0 && absl::StartsWith(line, "@oar ")) {
    auto f = Fields(line);
    TrainerReport& r = reports_[child];
    if (absl::StartsWith(line, "@oar chunk ")) {
      chunks_.push_back({.child = child,
                         .epoch = Num<int>(f, "epoch"),
                         .chunk = Num<int64_t>(f, "chunk"),
                         .examples = Num<int64_t>(f, "examples")});
    } else if (absl::StartsWith(line, "@oar ring ")) {
      const int64_t ring = Num<int64_t>(f, "ring");
      rings_[ring] = {.ring = ring,
                      .size = Num<int>(f, "size"),
                      .trainers = f.contains("trainers") ? std::string(f.at("trainers")) : std::string(),
                      .step = Num<int64_t>(f, "step"),
                      .epoch = Num<int64_t>(f, "epoch"),
                      .offset = Num<int64_t>(f, "offset")};
    } else if (absl::StartsWith(line, "@oar progress")) {
      ++job_steps_;
      ++r.reported;
      r.epoch = Num<int>(f, "epoch");
      r.epochs = Num<int>(f, "epochs");
      r.step = Num<int64_t>(f, "step");
      r.steps = Num<int64_t>(f, "steps");
      r.examples = Num<int64_t>(f, "examples");
      r.loss = Num<double>(f, "loss");
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if (first_step_ < 0) first_step_ = now;
      last_step_ = now;
    } else if (absl::StartsWith(line, "@oar result")) {
      r.result = f;
    }
    if (logs_[child]) {  // the process's own record of what it said (a replay of the job reads it)
      std::fprintf(logs_[child].get(), "%s\n", line.c_str());
      std::fflush(logs_[child].get());
    }
    return;
  }
  tails_[child].push_back(line);
  if (tails_[child].size() > kTailLines) tails_[child].pop_front();
  if (logs_[child]) {
    std::fprintf(logs_[child].get(), "%s\n", line.c_str());
    std::fflush(logs_[child].get());
    return;
  }
  ClearLocked();
  std::fprintf(stderr, "[%s] %s\n", names_[child].c_str(), line.c_str());
}

void LaunchMonitor::ClearLocked() {
  if (tty_ && drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

void LaunchMonitor::DrawLocked(bool final) {
  int epoch = 0, epochs = 0, live = 0;
  int64_t step = -1, steps = 0, examples = 0;
  double loss = 0;
  for (size_t i = 0; i < reports_.size(); ++i) {
    const TrainerReport& r = reports_[i];
    if (trainer_of_[i] < 0) continue;
    examples += r.examples;  // a trainer that died trained them too
    if (r.gone) continue;
    ++live;
    epoch = std::max(epoch, r.epoch);
    epochs = std::max(epochs, r.epochs);
    step = step < 0 ? r.step : std::min(step, r.step);
    steps = std::max(steps, r.steps);
    loss += r.loss;
  }
  loss /= std::max(live, 1);
  if (epoch == 0) return;  // nothing reported yet
  // Examples per second over the time trainers were stepping.
  const double secs = std::max(last_step_ - first_step_, 1e-3);
  // steps 0: a streamed source, whose steps are not known until read.
  const std::string of = steps > 0 ? absl::StrCat("/", steps) : std::string();
  const std::string text =
      absl::StrFormat("epoch %d/%d  step %lld%s  loss %.4f  %.0f examples/s (%zu trainers)", epoch, epochs,
                      static_cast<long long>(step), of, loss, examples / secs, static_cast<size_t>(live));
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", text.c_str(), final ? "\n" : "");
    drawn_ = !final;
    return;
  }
  // Not a terminal: a line at every tenth of an epoch (steps unknown: at
  // steps 1, 2, 4, 8, ...).
  int decile = steps > 0 ? static_cast<int>(epoch * 10 + step * 10 / steps) : 0;
  if (steps == 0) {
    for (int64_t s = std::max<int64_t>(step, 1); s > 1; s /= 2) ++decile;
    decile += epoch * 64;
  }
  if (decile != last_decile_) {
    std::fprintf(stderr, "%s\n", text.c_str());
    last_decile_ = decile;
  }
}

void LaunchMonitor::Tick() {
  absl::MutexLock l(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (tty_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  DrawLocked(false);
}

void LaunchMonitor::Finish() {
  absl::MutexLock l(&mu_);
  DrawLocked(true);
  drawn_ = false;
}

std::vector<std::string> LaunchMonitor::Tail(size_t child) const {
  absl::MutexLock l(&mu_);
  return {tails_[child].begin(), tails_[child].end()};
}

std::vector<TrainerReport> LaunchMonitor::Trainers() const {
  absl::MutexLock l(&mu_);
  std::vector<TrainerReport> out;
  for (size_t i = 0; i < reports_.size(); ++i) {
    if (trainer_of_[i] >= 0) out.push_back(reports_[i]);
  }
  return out;
}

std::vector<ChunkDone> LaunchMonitor::Chunks() const {
  absl::MutexLock l(&mu_);
  return chunks_;
}

std::vector<RingFormed> LaunchMonitor::Rings() const {
  absl::MutexLock l(&mu_);
  std::vector<RingFormed> out;
  for (const auto& [n, r] : rings_) out.push_back(r);
  return out;
}

int64_t LaunchMonitor::JobSteps() const {
  absl::MutexLock l(&mu_);
  return job_steps_;
}

bool LaunchMonitor::HasStepped(size_t child) const {
  absl::MutexLock l(&mu_);
  return child < reports_.size() && reports_[child].reported > 0;
}

double LaunchMonitor::FirstStepSeconds() const {
  absl::MutexLock l(&mu_);
  return first_step_;
}

}  // namespace oar::cli
