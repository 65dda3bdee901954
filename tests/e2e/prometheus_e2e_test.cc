// A real Prometheus server (Debian's prometheus) scrapes a launched 2 x 2
// job (`oar launch --metrics`, the processes lingering so the last scrape
// sees their totals), and its HTTP API returns the examples the job trained.
#include <gtest/gtest.h>

#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

// GET http://127.0.0.1:port/target: status and body; status 0 when nothing answers.
std::pair<int, std::string> Get(int port, const std::string& target) {
  try {
    boost::asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    http::request<http::string_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(socket, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return {static_cast<int>(res.result_int()), res.body()};
  } catch (const std::exception&) {
    return {0, ""};
  }
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Polls `done` every 100 ms for at most `seconds`.
template <typename F>
bool WaitFor(double seconds, F done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

// A process started in the background by the shell, killed at the end.
struct Background {
  int pid = 0;
  ~Background() {
    if (pid > 0) RunCommand("kill " + std::to_string(pid));
  }
  bool running() const { return pid > 0 && RunCommand("kill -0 " + std::to_string(pid)).code == 0; }
};

Background Start(const std::string& command, const std::string& log) {
  const Result r = RunCommand(command + " > " + log + " 2>&1 & echo $!");
  return Background{std::atoi(r.out.c_str())};
}

// The value of a one-sample instant query; -1 if the answer holds none.
double Query(int port, const std::string& encoded_query) {
  auto [code, body] = Get(port, "/api/v1/query?query=" + encoded_query);
  if (code != 200) return -1;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || j["status"] != "success" || j["data"]["result"].empty()) return -1;
  return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
}

TEST(PrometheusE2eTest, APrometheusServerScrapesALaunchedJobsExampleCount) {
  OAR_NEED_TOOL(RunCommand("prometheus --version").code == 0, "prometheus (Debian's prometheus)");
  const std::string dir = TempDir("prometheus_e2e");
  std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\n"
                                            "scrape_configs:\n  - job_name: oar\n    file_sd_configs:\n"
                                            "      - files: ['"
                                         << dir << "/targets.json']\n";
  std::ofstream(dir + "/targets.json") << "[]";
  Background prometheus = Start("exec prometheus --config.file=" + dir + "/prometheus.yml --storage.tsdb.path=" + dir +
                                    "/data --web.listen-address=127.0.0.1:0",
                                dir + "/prometheus.log");
  // It binds port 0 and logs the port it got.
  int port = 0;
  ASSERT_TRUE(WaitFor(60, [&] {
    std::smatch got;
    const std::string log = ReadAll(dir + "/prometheus.log");
    if (!std::regex_search(log, got, std::regex("msg=\"Listening on\" address=127\\.0\\.0\\.1:([0-9]+)"))) return false;
    port = std::stoi(got[1].str());
    return true;
  })) << ReadAll(dir + "/prometheus.log");
  ASSERT_TRUE(WaitFor(60, [&] { return Get(port, "/-/ready").first == 200; })) << ReadAll(dir + "/prometheus.log");

  const int64_t examples = 6400;
  Background job = Start("exec " + OarBinary() +
                             " launch --pservers 2 --trainers 2 --model fashion_mlp --epochs 1 --batch_size 64 "
                             "--limit " +
                             std::to_string(examples) + " --metrics --metrics_linger_s 10",
                         dir + "/launch.log");
  // The launcher prints every process's address first: they become the
  // server's targets (file_sd; the server watches the file, but applies new
  // targets at most every 5 s, so the processes linger 10 s: over shared
  // memory the training itself is over in well under a second).
  std::smatch m;
  std::string line;
  ASSERT_TRUE(WaitFor(60, [&] {
    const std::string log = ReadAll(dir + "/launch.log");
    const size_t at = log.find("oar launch: metrics: ");
    if (at == std::string::npos || log.find('\n', at) == std::string::npos) return false;
    line = log.substr(at, log.find('\n', at) - at);
    return true;
  })) << ReadAll(dir + "/launch.log");
  std::vector<std::string> targets;
  const std::regex address("http://(127\\.0\\.0\\.1:[0-9]+)/metrics");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), address); it != std::sregex_iterator(); ++it) {
    targets.push_back("\"" + (*it)[1].str() + "\"");
  }
  ASSERT_EQ(targets.size(), 4u) << line;
  {
    std::ofstream(dir + "/targets.tmp") << "[{\"targets\": [" << targets[0] << "," << targets[1] << "," << targets[2]
                                        << "," << targets[3] << "]}]";
    std::filesystem::rename(dir + "/targets.tmp", dir + "/targets.json");
  }
  ASSERT_TRUE(WaitFor(180, [&] { return !job.running(); })) << ReadAll(dir + "/launch.log");
  const std::string log = ReadAll(dir + "/launch.log");
  ASSERT_NE(log.find("trained on " + std::to_string(examples) + " examples"), std::string::npos) << log;
  // What the server stored, from the API: the highest example count each
  // trainer reported, summed; and all four processes were scraped.
  EXPECT_EQ(Query(port, "sum%28max_over_time%28oar_trainer_examples_total%5B10m%5D%29%29"), examples)
      << ReadAll(dir + "/prometheus.log");
  EXPECT_EQ(Query(port, "count%28max_over_time%28process_start_time_seconds%5B10m%5D%29%29"), 4);
}

}  // namespace
}  // namespace oar
