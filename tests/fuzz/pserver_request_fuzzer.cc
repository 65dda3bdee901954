// Fuzz target: the pserver's request handling, in process. Two pservers
// built from a real transpiled program (a 256→64→1 regression with Adam,
// fc_w sliced into blocks across two pserver endpoints; 2 trainers), one
// sync and one async, answer whatever request the input holds exactly as
// they would one from the network: the message is parsed as the gRPC
// server parses it (ParseMessage) and handed to ParameterServer::Handle.
// Every answer is a status; nothing may crash, hang past the pserver's
// bound or touch memory it does not own.
//
// Input: byte 0 picks the pserver (bit 0: sync or async) and the RPC kind
// (bits 1-3, modulo the kinds); the rest is the VariableMessage. A
// CheckpointNotify (which writes files where the message says) is taken as
// a Send, and a sync Get (which waits for the other trainers' barriers) as
// a GetNoBarrier, so each run stays fast and writes nothing. A COMPLETE
// starts that pserver afresh afterwards.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/rpc/inprocess_transport.h"
#include "common/rpc/var_serde.h"
#include "pserver/parameter_server.h"
#include "pserver/pserver_ops.h"
#include "tests/fuzz/fuzz_util.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"

namespace {

constexpr char kPservers[] = "127.0.0.1:6174,127.0.0.1:6175";

struct Pserver {
  oar::ProgramDesc main, startup;
  oar::Scope scope;
  std::unique_ptr<oar::ParameterServer> ps;
};

oar::rpc::InProcessTransport& Transport() {
  static auto* t = new oar::rpc::InProcessTransport();
  return *t;
}

std::unique_ptr<Pserver> Make(bool sync) {
  oar::UniqueNameGuard names;
  oar::Program main, startup;
  {
    oar::ProgramGuard g(&main, &startup);
    oar::Var x = oar::layers::data("x", {256});
    oar::ParamAttr w;
    w.name = "fc_w";  // 256x64: two blocks of 8192 elements
    oar::Var h = oar::layers::fc(x, 64, "relu", w);
    oar::Var y = oar::layers::data("y", {1});
    oar::Var loss = oar::layers::mean(oar::layers::square_error_cost(oar::layers::fc(h, 1), y));
    oar::optimizer::Adam(0.01f).minimize(loss);
  }
  oar::DistributeTranspiler t;
  auto s = t.transpile(0, &main.desc(), kPservers, 2, sync, &startup.desc());
  if (!s.ok()) __builtin_trap();
  auto programs = t.get_pserver_programs("127.0.0.1:6174");
  if (!programs.ok()) __builtin_trap();
  auto p = std::make_unique<Pserver>();
  p->main = std::move(programs->first);
  p->startup = std::move(programs->second);
  oar::Executor exe;
  if (!exe.Run(p->startup, &p->scope).ok()) __builtin_trap();
  const oar::BlockDesc& b0 = p->main.Block(0);
  for (size_t i = 0; i < b0.OpSize(); ++i) {
    if (b0.Op(i).type != "listen_and_serv") continue;
    auto config = oar::ListenAndServConfig(b0.Op(i));
    if (!config.ok()) __builtin_trap();
    config->transport = &Transport();
    config->timeout_ms = 50;
    auto ps = oar::ParameterServer::Create(*config, p->main, &p->scope);
    if (!ps.ok()) __builtin_trap();
    p->ps = *std::move(ps);
    return p;
  }
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Pserver* servers[2] = {[] {
                                  oar::OpRegistry::ExtendGlobal(oar::RegisterDistOps);
                                  oar::OpRegistry::ExtendGlobal(oar::RegisterPserverOps);
                                  return Make(true).release();
                                }(),
                                Make(false).release()};
  if (size < 1) return 0;
  const bool sync = (data[0] & 1) == 0;
  auto kind = static_cast<oar::rpc::RpcKind>((data[0] >> 1) % oar::rpc::kNumRpcKinds);
  if (kind == oar::rpc::RpcKind::kCheckpointNotify) kind = oar::rpc::RpcKind::kSend;
  if (sync && kind == oar::rpc::RpcKind::kGet) kind = oar::rpc::RpcKind::kGetNoBarrier;
  grpc::Slice slice(data + 1, size - 1);
  grpc::ByteBuffer buffer(&slice, 1);
  auto msg = oar::rpc::ParseMessage(buffer);
  if (!msg.ok()) return 0;  // var_message_fuzzer's ground
  Pserver* p = servers[sync ? 0 : 1];
  if (p->ps->MaxRequestBytes() != 0 && (*msg)->header().payload_bytes > p->ps->MaxRequestBytes()) return 0;
  oar::rpc::Reply reply;
  (void)p->ps->Handle(kind, **msg, &reply);
  if ((*msg)->header().name() == oar::rpc::kComplete || (*msg)->header().name() == oar::rpc::kAbort) {
    // A trainer that completed stays completed, and a job a trainer's ABORT
    // stopped stays stopped: start this pserver afresh so that later inputs
    // meet a running job, not a finished one.
    delete p;
    servers[sync ? 0 : 1] = Make(sync).release();
  }
  return 0;
}

namespace oar::fuzz {

// For both pservers: every variable the pserver program declares in block 0
// sent (zeros of its shape) by trainer 0 and, for `.trainer_1` copies,
// trainer 1 when it is a gradient; each persistable fetched by Get and
// GetNoBarrier; the barriers, COMPLETE and ABORT. Byte 0 as LLVMFuzzerTestOneInput reads it.
std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  int64_t seq = 1;
  for (int sync = 1; sync >= 0; --sync) {
    std::unique_ptr<Pserver> p = Make(sync == 1);
    const uint8_t server = sync == 1 ? 0 : 1;
    auto kind_byte = [&](rpc::RpcKind k) { return static_cast<char>(server | (static_cast<int>(k) << 1)); };
    for (const auto& [name, desc] : p->main.Block(0).vars()) {
      if (desc.type != paddle::framework::proto::VarType::LOD_TENSOR || desc.shape.empty()) continue;
      Variable v;
      Tensor* t = v.GetMutable<Tensor>();
      t->Resize(DDim(desc.shape));
      std::memset(t->mutable_data(desc.dtype), 0, t->nbytes());
      const int64_t trainer = absl::EndsWith(name, ".trainer_1") ? 1 : 0;
      if (absl::StrContains(name, "@GRAD")) {
        seeds.push_back(Prefixed(kind_byte(rpc::RpcKind::kSend), MessageBytes(name, &v, trainer, false, seq++)));
      } else if (desc.persistable) {
        seeds.push_back(Prefixed(kind_byte(rpc::RpcKind::kGet), MessageBytes(name, nullptr, trainer, false, seq++)));
        seeds.push_back(
            Prefixed(kind_byte(rpc::RpcKind::kGetNoBarrier), MessageBytes(name, nullptr, trainer, false, seq++)));
      }
    }
    for (const char* control : {rpc::kBatchBarrier, rpc::kFetchBarrier, rpc::kComplete, rpc::kAbort}) {
      for (int64_t trainer : {0, 1}) {
        seeds.push_back(
            Prefixed(kind_byte(rpc::RpcKind::kSend), MessageBytes(control, nullptr, trainer, false, seq++)));
      }
    }
  }
  return seeds;
}

}  // namespace oar::fuzz
