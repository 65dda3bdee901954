// Runs the real `oar` binary (OarBinary(), tests/util/build_paths.h) as a
// user would —
// or any command line: its exit code and everything it printed, stdout
// then stderr merged.
//
// Thread-safety: any thread; each call is its own process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "tests/util/build_paths.h"

namespace oar {

struct Result {
  int code;
  std::string out;  // stdout and stderr
};

// Any shell command line, as above.
inline Result RunCommand(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline Result Oar(const std::string& args) { return RunCommand(OarBinary() + " " + args); }

// The number printed after the last `key` ("test_auc=") in `out`; -1 if none.
inline double ValueAfter(const std::string& out, const std::string& key) {
  const size_t at = out.rfind(key);
  double v = -1;
  if (at != std::string::npos) (void)absl::SimpleAtod(out.substr(at + key.size(), 6), &v);
  return v;
}

// A fresh directory for one test, removed first if it exists, and removed
// again when the test binary exits normally (by this process only: a forked
// child that exits leaves its parent's folders alone).
inline std::string TempDir(const std::string& tag) {
  static std::vector<std::filesystem::path> made;
  static const pid_t owner = getpid();
  static const bool cleanup = std::atexit([] {
                                if (getpid() != owner) return;
                                std::error_code ec;
                                for (const auto& d : made) std::filesystem::remove_all(d, ec);
                              }) == 0;
  (void)cleanup;
  auto d = std::filesystem::temp_directory_path() / ("oar_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  made.push_back(d);
  return d.string();
}

}  // namespace oar
