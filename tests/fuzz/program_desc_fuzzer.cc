// Fuzz target: a serialized ProgramDesc as `oar inspect` and `oar train
// --program` load one: ProgramDesc::Parse, printing it, and checking every
// op against the op registry (unknown types, slots, attribute types and
// values). Whatever the bytes, each step returns a status; none may crash,
// read out of bounds or overflow.
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_desc.h"
#include "pserver/pserver_ops.h"
#include "tests/fuzz/fuzz_util.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = [] {
    oar::OpRegistry::ExtendGlobal(oar::RegisterDistOps);
    oar::OpRegistry::ExtendGlobal(oar::RegisterPserverOps);
    return true;
  }();
  (void)registered;
  auto program = oar::ProgramDesc::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!program.ok()) return 0;
  std::string text = (*program)->ToString();
  const oar::OpRegistry& registry = oar::OpRegistry::Global();
  for (size_t b = 0; b < (*program)->NumBlocks(); ++b) {
    const oar::BlockDesc& block = (*program)->Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      oar::OpDesc op = block.Op(i);
      if (!registry.Get(op.type).ok()) continue;
      (void)registry.Find(op.type)->CheckAndFill(&op);
    }
  }
  return 0;
}

namespace oar::fuzz {

// A small CNN's main and startup programs, and what the transpiler makes of
// them for 2 pservers (trainer program; a pserver program with optimize
// blocks and listen_and_serv's block attributes).
std::vector<std::string> FuzzSeeds() {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var img = layers::data("img", {1, 8, 8});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var conv = layers::relu(layers::conv2d(img, 4, {3, 3}, {1, 1}, {1, 1}));
    Var pool = layers::pool2d(conv, {2, 2}, "max", {2, 2});
    Var pred = layers::fc(pool, 10, "softmax");
    Var loss = layers::mean(layers::cross_entropy(pred, label));
    optimizer::Momentum(0.01f, 0.9f).minimize(loss);
  }
  std::vector<std::string> seeds = {main.desc().Serialize(), startup.desc().Serialize()};
  DistributeTranspiler t;
  if (!t.transpile(0, &main.desc(), "127.0.0.1:6174,127.0.0.1:6175", 2, true, &startup.desc()).ok()) __builtin_trap();
  auto trainer = t.get_trainer_program(false);
  auto pserver = t.get_pserver_programs("127.0.0.1:6174");
  if (!trainer.ok() || !pserver.ok()) __builtin_trap();
  seeds.push_back(trainer->Serialize());
  seeds.push_back(pserver->first.Serialize());
  seeds.push_back(pserver->second.Serialize());
  return seeds;
}

}  // namespace oar::fuzz
