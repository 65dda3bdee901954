#include "cli/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

extern char** environ;

namespace oar::cli {
namespace {

// The launcher's environment with `extra` set on top.
std::vector<std::string> ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

absl::Status CheckSpec(const ChildSpec& c) {
  if (c.listen_fds.size() > 64) return absl::InvalidArgumentError(absl::StrCat(c.name, ": more than 64 sockets"));
  for (int cpu : c.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return absl::InvalidArgumentError(absl::StrCat(c.name, ": no CPU ", cpu));
  }
  return absl::OkStatus();
}

}  // namespace

ProcessGroup::~ProcessGroup() {
  bool any = false;
  for (pid_t p : pids_) any |= p > 0;
  if (any) StopAll(2000);
  DrainOutput();
}

absl::Status ProcessGroup::Start(std::vector<ChildSpec> children, LineFn on_line) {
  on_line_ = std::move(on_line);
  for (const auto& c : children) OAR_RETURN_IF_ERROR(CheckSpec(c));  // before any child starts
  for (auto& c : children) OAR_RETURN_IF_ERROR(StartOne(std::move(c)));
  reader_ = std::thread([this] { ReadLoop(); });
  return absl::OkStatus();
}

absl::Status ProcessGroup::Add(ChildSpec child) {
  OAR_RETURN_IF_ERROR(CheckSpec(child));
  return StartOne(std::move(child));
}

absl::Status ProcessGroup::StartOne(ChildSpec c) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : c.cpus) CPU_SET(cpu, &cpus);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe for ", c.name, ": ", std::strerror(errno)));
  }
  std::vector<std::pair<std::string, std::string>> env = c.env;
  if (!c.listen_fds.empty()) {
    // LISTEN_PID's digits are written in the child, which alone knows its pid.
    env.emplace_back("LISTEN_FDS", std::to_string(c.listen_fds.size()));
    env.emplace_back("LISTEN_PID", std::string(10, ' '));
  }
  std::vector<std::string> argv = c.argv, envp = ChildEnvironment(env);
  std::vector<char*> argv_c = CStrings(argv), envp_c = CStrings(envp);
  char* listen_pid = nullptr;
  for (auto& e : envp) {
    if (e.rfind("LISTEN_PID=", 0) == 0 && !c.listen_fds.empty()) listen_pid = e.data() + 11;
  }
  const std::vector<int>& handed = c.listen_fds;
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork for ", c.name, ": ", std::strerror(errno)));
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != launcher) ::_exit(127);  // the launcher died already
    if (!c.cpus.empty() && ::sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      const char msg[] = "oar launch: could not bind a child to its CPUs (sched_setaffinity)\n";
      [[maybe_unused]] ssize_t n = ::write(err[1], msg, sizeof(msg) - 1);
      ::_exit(127);
    }
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (!handed.empty()) {
      // Out of the way first (a handed fd may sit where another must go),
      // then to 3, 4, ...; dup2 leaves the copies open across exec.
      int high[64];
      const size_t n = handed.size() < 64 ? handed.size() : 64;
      for (size_t i = 0; i < n; ++i) high[i] = ::fcntl(handed[i], F_DUPFD_CLOEXEC, 100);
      for (size_t i = 0; i < n; ++i) ::dup2(high[i], 3 + static_cast<int>(i));
      char digits[16];
      int len = 0;
      for (pid_t p = ::getpid(); p > 0; p /= 10) digits[len++] = static_cast<char>('0' + p % 10);
      for (int i = 0; i < 10; ++i) listen_pid[i] = i < len ? digits[len - 1 - i] : '\0';
    }
    ::execve(argv_c[0], argv_c.data(), envp_c.data());
    const char msg[] = "oar launch: exec failed\n";
    [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  for (int fd : c.listen_fds) ::close(fd);
  specs_.push_back(std::move(c));
  pids_.push_back(pid);
  absl::MutexLock l(&mu_);
  fds_.push_back(out[0]);
  fds_.push_back(err[0]);
  return absl::OkStatus();
}

void ProcessGroup::ReadLoop() {
  std::vector<std::string> partial;
  std::vector<int> fds;
  char buf[65536];
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      for (size_t i = 0; i < fds.size(); ++i) fds_[i] = fds[i];                  // those this loop closed
      for (size_t i = fds.size(); i < fds_.size(); ++i) fds.push_back(fds_[i]);  // those Add made
      partial.resize(fds.size());
      bool open = false;
      for (int fd : fds) open |= fd >= 0;
      if (!open && draining_) return;
    }
    std::vector<pollfd> pfds;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) continue;
      pfds.push_back({fds[i], POLLIN, 0});
      which.push_back(i);
    }
    if (pfds.empty()) {  // every child gone: Add or DrainOutput is next
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (::poll(pfds.data(), pfds.size(), 100) < 0 && errno != EINTR) return;
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      const size_t i = which[k];
      const ssize_t n = ::read(fds[i], buf, sizeof(buf));
      if (n > 0) {
        partial[i].append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = partial[i].find('\n')) != std::string::npos) {
          on_line_(i / 2, partial[i].substr(0, nl), i % 2 == 0);
          partial[i].erase(0, nl + 1);
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        if (!partial[i].empty()) on_line_(i / 2, partial[i], i % 2 == 0);
        partial[i].clear();
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
}

std::vector<ChildExit> ProcessGroup::Poll() {
  std::vector<ChildExit> out;
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    int st = 0;
    if (::waitpid(pids_[i], &st, WNOHANG) != pids_[i]) continue;
    const pid_t pid = pids_[i];
    pids_[i] = -1;
    if (WIFSIGNALED(st)) {
      out.push_back({i, 128 + WTERMSIG(st), WTERMSIG(st), pid});
    } else {
      out.push_back({i, WEXITSTATUS(st), 0, pid});
    }
  }
  return out;
}

void ProcessGroup::Signal(int sig) {
  for (pid_t p : pids_) {
    if (p > 0) ::kill(-p, sig);  // its whole process group
  }
}

void ProcessGroup::SignalOne(size_t i, int sig) {
  if (i < pids_.size() && pids_[i] > 0) ::kill(-pids_[i], sig);
}

void ProcessGroup::StopAll(int grace_ms) {
  Signal(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  auto running = [&] {
    for (pid_t p : pids_) {
      if (p > 0) return true;
    }
    return false;
  };
  while (running() && std::chrono::steady_clock::now() < deadline) {
    Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Signal(SIGKILL);
  for (pid_t& p : pids_) {
    if (p > 0) ::waitpid(p, nullptr, 0);
    p = -1;
  }
}

void ProcessGroup::DrainOutput() {
  {
    absl::MutexLock l(&mu_);
    draining_ = true;
  }
  if (reader_.joinable()) reader_.join();
}

}  // namespace oar::cli
