// RpcOptions: everything a process's RPC layer is configured with — the
// deadline and retries of its calls, how its servers queue and bound
// requests, which transport carries tensors and how the stream transports
// (TCP, shared memory) behave. A transport is built with one (MakeTransport,
// GrpcTransport, InProcessTransport) and hands it to what it makes: its
// clients' calls, its servers, its stream connections; RpcClient and the
// servers started on it (listen_and_serv, gen_nccl_id) read it from there.
//
// The defaults are those of the --rpc_* flags. Library code never reads the
// flags: `oar` resolves them (and Fluid's FLAGS_rpc_* environment variables)
// once, in cli/rpc_flags.h, and tests and benches fill the struct directly.
//
//   rpc::RpcOptions o;
//   o.deadline_ms = 5000;
//   auto transport = rpc::MakeTransport(o);   // transport_select.h
//
// Thread-safety: a plain struct.
#pragma once

#include <cstdint>
#include <string>

namespace oar::rpc {

struct RpcOptions {
  // Calls and waits.
  int deadline_ms = 180000;  // one RPC (all its retries), every barrier wait, a stream's I/O
  int retry_times = 3;       // retries of a call that failed UNAVAILABLE or RESOURCE_EXHAUSTED
  // Microseconds a caller waiting for a reply over gRPC (or a TLS stream)
  // spins before it sleeps; -1: this host's default (SpinMicros).
  int wait_spin_us = -1;

  // Which transport carries tensors: "auto", "grpc", "tcp" or "shm"
  // (transport_select.h).
  std::string transport = "auto";
  // Seeded faults to inject into every call (fault_injection.h); "": none.
  std::string fault_injection;
  // Sent with every call and checked by every server ("": none).
  std::string auth_token;
  // PEM files: a server's certificate and key (TLS when both are set) and
  // the root certificates its clients trust (TLS on the client when set).
  std::string tls_cert, tls_key, tls_ca;

  // Servers: handler threads per RPC kind, and the bounds on what they
  // accept before a handler takes it.
  int send_threads = 12, get_threads = 12, prefetch_threads = 12;
  // Largest request read; 0: the handler's own bound (a pserver's largest
  // variable).
  int64_t max_message_bytes = 0;
  // Requests of one kind waiting for a handler thread before new ones are
  // answered RESOURCE_EXHAUSTED.
  int max_queued_requests = 256;
  // Gradient bytes a server holds read at once; 0: no bound.
  int64_t max_inflight_request_bytes = 32 << 20;

  // The stream transports. A sync pserver lends the parameters it serves
  // over shared memory (and a trainer takes the loan); a trainer lends the
  // memory its gradients are sent from (and a sync pserver takes it).
  bool shm_lend_params = true;
  bool shm_lend_sends = true;
  int64_t shm_send_region_bytes = int64_t{1} << 30;  // address space set aside for lent sends
  int64_t shm_ring_bytes = 2 << 20;                  // each of a shm connection's two rings
  int shm_batch_wakeups = -1;                        // > 0: a server batches its wake-ups of shm peers
  int shm_spin_us = -1;                              // a shm wait's spin; -1: this host's default
  int socket_buffer_bytes = 0;                       // SO_SNDBUF/SO_RCVBUF of a TCP stream; 0: the kernel's
};

}  // namespace oar::rpc
