// Oar's coverage of the reference's Paddle API list (issue 48, item 4):
// every case PaddlePaddle 2.6.2 wrote (tests/paddle_fixtures/
// api_coverage.py, committed under tests/testdata/paddle_api/) replayed
// through the path a user's program takes — parse, the load-time check,
// startup, Paddle's persistables, a run — and compared with Paddle's
// outputs and gradients. The table it makes is docs/paddle-api-coverage.md
// and its totals line is in README.md: the test fails when either is not
// what Oar does now (scripts/api-coverage.sh rewrites both).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/common/paddle/api_case_runner.h"
#include "tests/util/build_paths.h"

namespace oar::api_coverage {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line where `got` and `want` differ, both versions.
std::string FirstDifference(const std::string& got, const std::string& want) {
  const std::vector<std::string> g = absl::StrSplit(got, '\n'), w = absl::StrSplit(want, '\n');
  for (size_t i = 0; i < std::max(g.size(), w.size()); ++i) {
    const std::string a = i < g.size() ? g[i] : "(end)", b = i < w.size() ? w[i] : "(end)";
    if (a != b) return absl::StrCat("line ", i + 1, ":\n  file: ", a, "\n  now:  ", b);
  }
  return "";
}

struct Totals {
  int listed = 0, not_ops = 0, no_paddle_kernel = 0, measured = 0, covered = 0;
};

std::string Percent(int covered, int measured) {
  return measured == 0 ? "—" : absl::StrFormat("%.1f%%", 100.0 * covered / measured);
}

// OAR_API_CASE=paddle.nn.RNN,fluid.layers.While replays just those cases
// and prints what each gives (for work on one API; skipped otherwise).
TEST(PaddleApiCoverage, OneCase) {
  const char* only = std::getenv("OAR_API_CASE");
  if (only == nullptr) GTEST_SKIP() << "set OAR_API_CASE=<case dir>[,...] to replay single cases";
  for (absl::string_view d : absl::StrSplit(only, ',', absl::SkipEmpty())) {
    const ApiCaseResult r = RunApiCase(TestdataDir() + "/paddle_api/" + std::string(d));
    std::cout << d << ": " << r.loads << " | " << r.forward << " | " << r.gradient << " " << r.detail << "\n";
    EXPECT_TRUE(r.covered()) << d;
  }
}

TEST(PaddleApiCoverage, TableAndReadmeSayWhatOarDoes) {
  const std::string dir = TestdataDir() + "/paddle_api/";
  const std::string cases = ReadAll(dir + "cases.txt");
  ASSERT_FALSE(cases.empty()) << dir << "cases.txt";
  std::vector<std::string> sections;
  std::map<std::string, Totals> totals;
  std::string rows, uncovered_log;
  for (absl::string_view line : absl::StrSplit(cases, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    ASSERT_EQ(f.size(), 4u) << line;
    const std::string& section = f[0];
    if (!totals.count(section)) sections.push_back(section);
    Totals& t = totals[section];
    ++t.listed;
    std::string loads, forward, gradient;
    if (f[2] == "skip" && absl::StartsWith(f[3], "not an op")) {
      ++t.not_ops;
      loads = "not an op";
      forward = gradient = "—";
    } else if (f[2] == "paddle-fails") {
      ++t.no_paddle_kernel;
      loads = "Paddle 2.6 cannot run it on CPU: " + f[3].substr(0, 90);
      forward = gradient = "—";
    } else if (f[2] == "skip") {
      ++t.measured;
      loads = f[3];
      forward = gradient = "—";
    } else {
      ASSERT_EQ(f[2], "case") << line;
      ++t.measured;
      const ApiCaseResult r = RunApiCase(dir + f[3]);
      loads = r.loads, forward = r.forward, gradient = r.gradient;
      if (r.covered()) {
        ++t.covered;
      } else {
        absl::StrAppend(&uncovered_log, section, " ", f[1], ": ", loads, " | ", forward, " | ", gradient, " ", r.detail,
                        "\n");
      }
    }
    absl::StrAppend(&rows, "| ", section, " | `", f[1], "` | ", loads, " | ", forward, " | ", gradient, " |\n");
  }
  std::cout << "not covered:\n" << uncovered_log;

  Totals all;
  std::string table =
      "| section | listed | not ops | no CPU kernel in Paddle 2.6 | measured | covered | share |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& s : sections) {
    const Totals& t = totals[s];
    absl::StrAppend(&table, "| ", s, " | ", t.listed, " | ", t.not_ops, " | ", t.no_paddle_kernel, " | ", t.measured,
                    " | ", t.covered, " | ", Percent(t.covered, t.measured), " |\n");
    all.listed += t.listed, all.not_ops += t.not_ops, all.no_paddle_kernel += t.no_paddle_kernel;
    all.measured += t.measured, all.covered += t.covered;
  }
  absl::StrAppend(&table, "| **all** | ", all.listed, " | ", all.not_ops, " | ", all.no_paddle_kernel, " | ",
                  all.measured, " | **", all.covered, "** | **", Percent(all.covered, all.measured), "** |\n");
  const std::string readme_line =
      absl::StrCat("Paddle API coverage (docs/paddle-api-coverage.md): **", all.covered, " of ", all.measured,
                   " APIs (", Percent(all.covered, all.measured), ")** load, run and match PaddlePaddle 2.6.2.");
  const std::string doc = absl::StrCat(
      "# Paddle API coverage\n\n"
      "Generated by `scripts/api-coverage.sh`; checked by `api_coverage_test`. Do not edit.\n\n"
      "Each entry of the reference's API list (`tests/paddle_fixtures/api_list.txt`) in the sections\n"
      "`paddle`, `paddle.nn`, `paddle.nn.functional` and `fluid.layers` is one tiny static program,\n"
      "built with PaddlePaddle 2.6.2 as a user calls the API (`fluid.layers`: the op exactly as\n"
      "Fluid 1.x's layer wrote it), with a loss (each float output squared, summed) and its backward\n"
      "(`tests/paddle_fixtures/api_coverage.py`). Oar loads the program, runs it from Paddle's\n"
      "initial persistables on Paddle's random inputs, and compares every output and every input's\n"
      "and parameter's gradient with Paddle's: equal means within 1e-5 relative (to max(1, |Paddle|)).\n"
      "Random ops (dropout, sampling) compare shapes: Paddle's random stream cannot be matched.\n\n"
      "*Measured* counts what has a CPU kernel in Paddle 2.6, including the entries nobody has\n"
      "written a case for yet (those count as not covered). *Not ops* (places, mode switches,\n"
      "containers, Python-side objects) and what Paddle 2.6 itself cannot run on CPU are left out.\n\n",
      table, "\n", readme_line,
      "\n\n## Every entry\n\n| section | API | loads | forward | gradient |\n|---|---|---|---|---|\n", rows);

  const std::string doc_path = SourceDir() + "/docs/paddle-api-coverage.md";
  const std::string readme_path = SourceDir() + "/README.md";
  if (!std::ifstream(readme_path).good()) {  // a build copied without its sources (scripts/gpu-run.sh)
    GTEST_SKIP() << "no source tree at " << SourceDir() << " to compare the table with (set OAR_SOURCE_DIR)";
  }
  if (std::getenv("OAR_WRITE_API_COVERAGE") != nullptr) {
    std::ofstream(doc_path, std::ios::binary) << doc;
    std::string readme = ReadAll(readme_path);
    const size_t at = readme.find("Paddle API coverage (docs/paddle-api-coverage.md): ");
    ASSERT_NE(at, std::string::npos) << "README.md has no coverage line to update";
    readme.replace(at, readme.find('\n', at) - at, readme_line);
    std::ofstream(readme_path, std::ios::binary) << readme;
  }
  const std::string diff = FirstDifference(ReadAll(doc_path), doc);
  EXPECT_EQ(diff, "") << doc_path << " is not what Oar does now: run scripts/api-coverage.sh";
  EXPECT_TRUE(absl::StrContains(ReadAll(readme_path), readme_line))
      << "README.md should say: " << readme_line << " (scripts/api-coverage.sh)";
}

}  // namespace
}  // namespace oar::api_coverage
