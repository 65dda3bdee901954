// EtcdServer: a real etcd-server on loopback for one test
// (common/elastic/local_etcd.h: its own data folder and ports; Kill and
// Restart as a test of an etcd outage needs).
//
//   OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
//   auto etcd = EtcdServer::Start();
//   ASSERT_TRUE(etcd.ok()) << etcd.status();
//   auto client = elastic::EtcdClient::Connect((*etcd)->url(), absl::Seconds(5));
//
// or a fixture derived from EtcdTest, whose SetUp does that (server_, etcd_).
//
// Thread-safety: one test thread.
#pragma once

#include <memory>

#include "common/elastic/etcd_client.h"
#include "common/elastic/local_etcd.h"
#include "gtest/gtest.h"
#include "tests/util/need_tool.h"

namespace oar {

using EtcdServer = elastic::LocalEtcd;

// A test with its own etcd-server and a client of it: skipped where etcd
// is not installed (failed under CI=true, where it must be).
class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
    auto server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto client = elastic::EtcdClient::Connect(server_->url(), absl::Seconds(5));
    ASSERT_TRUE(client.ok()) << client.status();
    etcd_ = std::move(*client);
  }
  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<elastic::EtcdClient> etcd_;
};

}  // namespace oar
