#include "cli/rpc_flags.h"

#include <cstdint>

#include "common/base/flag_refusal.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/transport_select.h"
#include "gflags/gflags.h"

DEFINE_int32(rpc_deadline, 180000, "deadline of one RPC and of every barrier wait, in ms");
DEFINE_validator(rpc_deadline, [](const char*, int32_t v) {
  if (v > 0) return true;
  return oar::RefuseFlagValue("give a positive number of milliseconds");
});
DEFINE_bool(rpc_shm_lend_params, true,
            "a sync pserver keeps the parameters it serves in shared memory and lends it to the trainers it serves "
            "over shm; a Get's reply then says where the value lies and the trainer copies it from there (one copy "
            "instead of two, and none on the pserver); a trainer with this false does not take the loan");
DEFINE_bool(rpc_shm_lend_sends, true,
            "the other way: a trainer offers the pservers on its host the memory its gradients are sent from, and a "
            "sync pserver takes it; a Send then says where the value lies and the pserver reads it there (the "
            "trainer copies it once, as into the ring, and the pserver copies nothing); false on a trainer: it "
            "offers nothing; on a pserver: it does not take the loan");
DEFINE_int64(rpc_shm_send_region_bytes, int64_t{1} << 30,
             "address space a trainer sets aside for the gradients it lends (--rpc_shm_lend_sends); only the pages "
             "its gradients use take memory; a gradient that no longer fits is sent through the ring");
DEFINE_int32(rpc_retry_times, 3,
             "retries of an RPC that failed UNAVAILABLE or RESOURCE_EXHAUSTED, all within its --rpc_deadline");
DEFINE_int32(rpc_send_thread_num, 12, "pserver threads handling SendVariable");
DEFINE_int32(rpc_get_thread_num, 12, "pserver threads handling GetVariable");
DEFINE_int32(rpc_prefetch_thread_num, 12, "pserver threads handling PrefetchVariable");
DEFINE_string(rpc_tls_cert, "", "PEM certificate of this server (TLS when set with --rpc_tls_key)");
DEFINE_string(rpc_tls_key, "", "PEM private key of this server");
DEFINE_string(rpc_tls_ca, "", "PEM root certificates that clients trust (TLS on the client side when set)");
DEFINE_int64(rpc_max_message_bytes, 0,
             "largest request a server reads; 0: a pserver derives it from the largest variable it receives");
DEFINE_int32(rpc_max_queued_requests, 256,
             "requests of one RPC kind waiting for a handler thread before new ones are answered RESOURCE_EXHAUSTED");
DEFINE_int64(rpc_max_inflight_request_bytes, 32 << 20,
             "gradient bytes a server holds read at once; further sends wait unread (flow control holds them at the "
             "sender); 0: no bound");
DEFINE_int32(rpc_wait_spin_us, -1,
             "how long a caller waiting for a reply over gRPC (or a TLS stream) spins before it sleeps (a sleeping "
             "thread's wake-up costs tens of microseconds on some hosts; over the tcp and shm streams the caller "
             "reads its reply itself); -1: 50 on hosts of 4 or more cores, 0 on smaller ones");
DEFINE_int64(rpc_shm_ring_bytes, 2 << 20, "bytes of each of the two shared-memory rings of one shm connection");
DEFINE_int32(rpc_shm_batch_wakeups, -1,
             "whether a trainer's requests over shared memory leave the pserver asleep until the trainer waits for "
             "an answer (one wake-up per burst of sends; a pserver's reader then answers a burst with one too): "
             "1 yes, 0 no, -1: yes in the processes of an `oar launch` "
             "that runs more of them than the host has cores (a woken pserver would take the core a trainer computes "
             "on), else no (an idle core stores gradients while the trainer computes)");
DEFINE_int32(rpc_shm_spin_us, -1,
             "how long a shared-memory reader or writer spins on an empty or full ring before it sleeps; -1: 50 on "
             "hosts of 4 or more cores, 0 on smaller ones (where a spinning reader takes the core a peer computes "
             "on); the processes of an `oar launch` get 50 when each has a CPU of its own, 0 when they outnumber "
             "the CPUs");
DEFINE_int32(rpc_socket_buffer_bytes, 0,
             "SO_SNDBUF/SO_RCVBUF of the TCP stream transport's sockets; 0 leaves the kernel's autotuning");
DEFINE_string(rpc_fault_injection, "",
              "testing only: misbehave on this process's outgoing RPCs by a seeded schedule, e.g. "
              "'seed=7,drop_reply=0.05,duplicate=0.05,delay=0.1,reorder=0.05,max_delay_ms=20'");
DEFINE_string(rpc_transport, "auto",
              "how tensors travel between Oar processes: auto (shared memory on one host, else a TCP stream, else "
              "gRPC; whatever both ends speak), grpc, tcp or shm; gRPC always carries control and serves Fluid");
DEFINE_validator(rpc_transport, [](const char*, const std::string& v) {
  if (oar::rpc::ParseTransportMode(v).ok()) return true;
  return oar::RefuseFlagValue("choose auto, grpc, tcp or shm");
});

namespace oar::cli {

rpc::RpcOptions RpcOptionsFromFlags() {
  rpc::RpcOptions o;
  o.deadline_ms = FLAGS_rpc_deadline;
  o.retry_times = FLAGS_rpc_retry_times;
  o.wait_spin_us = FLAGS_rpc_wait_spin_us;
  o.transport = FLAGS_rpc_transport;
  o.fault_injection = FLAGS_rpc_fault_injection;
  o.auth_token = rpc::AuthTokenFromEnv();
  o.tls_cert = FLAGS_rpc_tls_cert;
  o.tls_key = FLAGS_rpc_tls_key;
  o.tls_ca = FLAGS_rpc_tls_ca;
  o.send_threads = FLAGS_rpc_send_thread_num;
  o.get_threads = FLAGS_rpc_get_thread_num;
  o.prefetch_threads = FLAGS_rpc_prefetch_thread_num;
  o.max_message_bytes = FLAGS_rpc_max_message_bytes;
  o.max_queued_requests = FLAGS_rpc_max_queued_requests;
  o.max_inflight_request_bytes = FLAGS_rpc_max_inflight_request_bytes;
  o.shm_lend_params = FLAGS_rpc_shm_lend_params;
  o.shm_lend_sends = FLAGS_rpc_shm_lend_sends;
  o.shm_send_region_bytes = FLAGS_rpc_shm_send_region_bytes;
  o.shm_ring_bytes = FLAGS_rpc_shm_ring_bytes;
  o.shm_batch_wakeups = FLAGS_rpc_shm_batch_wakeups;
  o.shm_spin_us = FLAGS_rpc_shm_spin_us;
  o.socket_buffer_bytes = FLAGS_rpc_socket_buffer_bytes;
  return o;
}

}  // namespace oar::cli
