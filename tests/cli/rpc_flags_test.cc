// Configuration at the edge: the --rpc_* flags become the RpcOptions a
// transport is built with, and what is built on that transport — the RPC
// client, a server started on it, the stream connections — takes its
// settings from there, with nothing read from the flags below cli/.
#include "cli/rpc_flags.h"

#include <cstdlib>

#include "common/rpc/inprocess_transport.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/transport.h"
#include "common/rpc/transport_select.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"

DECLARE_int64(rpc_shm_ring_bytes);
DECLARE_bool(rpc_shm_lend_sends);
DECLARE_int32(rpc_send_thread_num);
DECLARE_string(rpc_tls_cert);

namespace oar {
namespace {

TEST(RpcFlagsTest, TheFlagsAndTheAuthTokenBecomeTheOptions) {
  gflags::FlagSaver saver;
  FLAGS_rpc_deadline = 4321;
  FLAGS_rpc_retry_times = 7;
  FLAGS_rpc_transport = "tcp";
  FLAGS_rpc_shm_spin_us = 9;
  FLAGS_rpc_shm_ring_bytes = 1 << 20;
  FLAGS_rpc_shm_lend_sends = false;
  FLAGS_rpc_send_thread_num = 3;
  FLAGS_rpc_tls_cert = "/some/cert.pem";
  ASSERT_EQ(setenv("OAR_AUTH_TOKEN", "t0ken", 1), 0);
  const rpc::RpcOptions o = cli::RpcOptionsFromFlags();
  unsetenv("OAR_AUTH_TOKEN");
  EXPECT_EQ(o.deadline_ms, 4321);
  EXPECT_EQ(o.retry_times, 7);
  EXPECT_EQ(o.transport, "tcp");
  EXPECT_EQ(o.shm_spin_us, 9);
  EXPECT_EQ(o.shm_ring_bytes, 1 << 20);
  EXPECT_FALSE(o.shm_lend_sends);
  EXPECT_EQ(o.send_threads, 3);
  EXPECT_EQ(o.tls_cert, "/some/cert.pem");
  EXPECT_EQ(o.auth_token, "t0ken");
}

TEST(RpcFlagsTest, TheFlagsDefaultsAreTheOptionsDefaults) {
  const rpc::RpcOptions from_flags = cli::RpcOptionsFromFlags(), plain;
  EXPECT_EQ(from_flags.deadline_ms, plain.deadline_ms);
  EXPECT_EQ(from_flags.retry_times, plain.retry_times);
  EXPECT_EQ(from_flags.transport, plain.transport);
  EXPECT_EQ(from_flags.max_queued_requests, plain.max_queued_requests);
  EXPECT_EQ(from_flags.max_inflight_request_bytes, plain.max_inflight_request_bytes);
  EXPECT_EQ(from_flags.shm_ring_bytes, plain.shm_ring_bytes);
  EXPECT_EQ(from_flags.shm_send_region_bytes, plain.shm_send_region_bytes);
  EXPECT_EQ(from_flags.send_threads, plain.send_threads);
}

TEST(RpcFlagsTest, AClientAndAServerTakeTheirTransportsSettings) {
  rpc::RpcOptions o;
  o.deadline_ms = 1234;
  o.retry_times = 5;
  o.send_threads = 2;
  o.max_queued_requests = 17;
  o.auth_token = "abc";
  rpc::InProcessTransport transport(o);
  rpc::RpcClient client(&transport);
  EXPECT_EQ(client.deadline_ms(), 1234);
  rpc::RpcClient own(&transport, {.deadline_ms = 99});  // the client's own choice wins
  EXPECT_EQ(own.deadline_ms(), 99);
  const rpc::ServerOptions s = rpc::ServeOptions(transport.options(), "127.0.0.1:0");
  EXPECT_EQ(s.endpoint, "127.0.0.1:0");
  EXPECT_EQ(s.send_threads, 2);
  EXPECT_EQ(s.max_queued_requests, 17);
  EXPECT_EQ(s.auth_token, "abc");
}

TEST(RpcFlagsTest, AnUnknownTransportIsRefusedNamingTheChoices) {
  rpc::RpcOptions o;
  o.transport = "carrier-pigeon";
  auto t = rpc::MakeTransport(o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("choose auto, grpc, tcp or shm"), std::string::npos) << t.status();
  o.transport = "shm";
  auto shm = rpc::MakeTransport(o);
  ASSERT_TRUE(shm.ok()) << shm.status();
  EXPECT_EQ((*shm)->Name(), "shm");
  EXPECT_EQ((*shm)->options().transport, "shm");
}

}  // namespace
}  // namespace oar
