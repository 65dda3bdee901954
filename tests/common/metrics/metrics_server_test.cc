// MetricsServer through HTTP as Prometheus scrapes it (a Beast client here).
#include "common/metrics/metrics_server.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

namespace oar::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

http::response<http::string_body> Request(int port, http::verb verb, const std::string& target) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return res;
}

TEST(MetricsServerTest, ServesTheRegistryAtSlashMetrics) {
  Registry r;
  Counter* steps = r.AddCounter("oar_steps_total", "Steps run")->With({});
  steps->Add(5);
  auto server = MetricsServer::Create({.port = 0, .registry = &r});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  auto res = Request((*server)->port(), http::verb::get, "/metrics");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res.body().find("oar_steps_total 5\n"), std::string::npos) << res.body();
  steps->Add();  // every scrape renders afresh
  EXPECT_NE(Request((*server)->port(), http::verb::get, "/metrics").body().find("oar_steps_total 6\n"),
            std::string::npos);
}

TEST(MetricsServerTest, OtherPathsAndMethodsAreRefused) {
  auto server = MetricsServer::Create({});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Request((*server)->port(), http::verb::get, "/nothing").result(), http::status::not_found);
  EXPECT_EQ(Request((*server)->port(), http::verb::post, "/metrics").result(), http::status::method_not_allowed);
}

TEST(MetricsServerTest, AStalledClientDoesNotBlockAScrape) {
  auto server = MetricsServer::Create({.io_timeout = absl::Seconds(30)});
  ASSERT_TRUE(server.ok()) << server.status();
  asio::io_context io;
  tcp::socket idle(io);  // connects and never sends a byte
  idle.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>((*server)->port())));
  EXPECT_EQ(Request((*server)->port(), http::verb::get, "/metrics").result(), http::status::ok);
  server->reset();  // and closing does not wait for the idle client either (the test would hang)
}

TEST(MetricsServerTest, ABadAddressOrABusyPortIsAClearError) {
  auto bad = MetricsServer::Create({.host = "not-an-ip"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not-an-ip"), std::string::npos) << bad.status();
  auto first = MetricsServer::Create({});
  ASSERT_TRUE(first.ok());
  auto second = MetricsServer::Create({.port = (*first)->port()});
  EXPECT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find((*first)->endpoint()), std::string::npos) << second.status();
}

}  // namespace
}  // namespace oar::metrics
