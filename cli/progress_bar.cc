#include "cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace oar::cli {

ProgressBar::ProgressBar(std::FILE* out, std::string title, int64_t total_steps)
    : out_(out),
      title_(std::move(title)),
      total_(std::max<int64_t>(1, total_steps)),
      known_(total_steps > 0),
      tty_(isatty(fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double ProgressBar::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double ProgressBar::examples_per_second() const {
  double s = seconds();
  return s > 0 ? examples_ / s : 0.0;
}

void ProgressBar::Step(int64_t examples, double loss) {
  ++steps_;
  examples_ += examples;
  loss_ = loss;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ > std::chrono::milliseconds(100)) {
      Draw(false);
      last_draw_ = now;
    }
  } else if (!known_) {
    if ((steps_ & (steps_ - 1)) == 0) Draw(false);  // steps 1, 2, 4, 8, ...
  } else if (steps_ * 10 / total_ > last_report_ && steps_ < total_) {
    last_report_ = steps_ * 10 / total_;
    Draw(false);
  }
}

void ProgressBar::Finish() { Draw(true); }

void ProgressBar::Draw(bool final) {
  if (!known_) {  // a streamed source: how many steps the epoch has is not known until its end
    std::fprintf(out_, "%s%s step %lld  %8.0f ex/s  loss %.4f%s", tty_ ? "\r" : "", title_.c_str(),
                 static_cast<long long>(steps_), examples_per_second(), loss_, (final || !tty_) ? "\n" : "");
    std::fflush(out_);
    return;
  }
  constexpr int kWidth = 30;
  int filled = static_cast<int>(kWidth * std::min(steps_, total_) / total_);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  std::fprintf(out_, "%s%s [%s] %lld/%lld  %8.0f ex/s  loss %.4f%s", tty_ ? "\r" : "", title_.c_str(), bar.c_str(),
               static_cast<long long>(steps_), static_cast<long long>(total_), examples_per_second(), loss_,
               (final || !tty_) ? "\n" : "");
  std::fflush(out_);
}

absl::StatusOr<StepLog> StepLog::Open(const std::string& path) {
  StepLog log;
  if (path.empty()) return log;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return absl::PermissionDeniedError(absl::StrCat("--step_log ", path, ": ", std::strerror(errno)));
  log.file_.reset(f, &std::fclose);
  return log;
}

void StepLog::Add(double loss) {
  if (!file_) return;
  std::fprintf(file_.get(), "%.9g\n", loss);
  std::fflush(file_.get());
}

}  // namespace oar::cli
