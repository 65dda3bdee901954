// `oar train --profile`: Fluid's per-op table through the user's path; its
// totals add up to the step time the trainer's metrics measured.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/util/oar_process.h"

namespace oar {
namespace {

// The rows of the table in `out`: name -> {calls, total ms}.
std::map<std::string, std::pair<double, double>> Rows(const std::string& out) {
  std::map<std::string, std::pair<double, double>> rows;
  const size_t header = out.find("\nEvent ");
  if (header == std::string::npos) return rows;
  std::istringstream lines(out.substr(out.find('\n', header + 1) + 1));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string name;
    double calls, total, min, max, ave, ratio;
    if (!(f >> name >> calls >> total >> min >> max >> ave >> ratio)) break;
    rows[name] = {calls, total};
  }
  return rows;
}

TEST(ProfileCliTest, TheTableCountsEveryOpAndAddsUpToTheStepTime) {
  const std::string dir = TempDir("profile_cli");
  const Result r =
      Oar("train --model fashion_mlp --limit 2560 --batch_size 64 --epochs 1 --profile "
          "--profile_sorted_key calls --metrics_file " +
          dir + "/m.prom");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Profiling Report"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Sorted by number of calls in descending order"), std::string::npos) << r.out;
  const auto rows = Rows(r.out);
  const double steps = 2560 / 64;
  ASSERT_TRUE(rows.count("mul")) << r.out;
  EXPECT_EQ(rows.at("mul").first, 3 * steps) << "three fc layers";
  EXPECT_EQ(rows.at("mul_grad").first, 3 * steps);
  double table_ms = 0;
  for (const auto& [name, row] : rows) table_ms += row.second;
  std::ifstream in(dir + "/m.prom");
  std::stringstream text;
  text << in.rdbuf();
  const std::string key = "\noar_trainer_step_duration_seconds_sum ";
  const size_t at = text.str().find(key);
  ASSERT_NE(at, std::string::npos) << text.str();
  const double step_ms = 1e3 * std::stod(text.str().substr(at + key.size()));
  // The ops' times are within the steps' (how much of a step they fill
  // depends on the machine's load, so that is not checked).
  EXPECT_GT(table_ms, 0) << r.out;
  EXPECT_LE(table_ms, step_ms) << r.out;
}

TEST(ProfileCliTest, ASortedKeyThatIsNotFluidsIsAClearError) {
  const Result r = Oar("train --model fashion_mlp --limit 640 --profile --profile_sorted_key median");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--profile_sorted_key 'median' is not one of calls, total, max, min, ave"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace oar
