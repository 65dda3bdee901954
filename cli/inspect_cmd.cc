// `oar inspect FILE.pb`: prints a serialized program — its blocks, variables
// with types and shapes, and ops with inputs, outputs and attributes — then
// checks every op against the op registry and fails on the first one Oar
// cannot run (unknown type, unknown slot, wrong attribute type), or says on
// stderr that every op passed.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "common/op_registry.h"
#include "common/program_desc.h"
#include "gflags/gflags.h"

namespace oar::cli {

int RunInspect(const std::vector<std::string>& args) {
  if (args.size() != 1) return Fail("usage: oar inspect FILE.pb");
  auto bytes = ReadFileBytes(args[0]);
  if (!bytes.ok()) return Fail(std::string(bytes.status().message()));
  auto program = ProgramDesc::Parse(*bytes);
  if (!program.ok()) return Fail(args[0] + ": " + std::string(program.status().message()));
  std::cout << (*program)->ToString();
  const OpRegistry& registry = OpRegistry::Global();
  size_t ops = 0;
  for (size_t b = 0; b < (*program)->NumBlocks(); ++b) {
    const BlockDesc& block = (*program)->Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      OpDesc op = block.Op(i);
      absl::Status s = registry.Get(op.type).status();
      if (s.ok()) s = registry.Find(op.type)->CheckAndFill(&op);
      if (!s.ok()) {
        return Fail(args[0] + ": block " + std::to_string(b) + ", op #" + std::to_string(i) + ": " +
                    std::string(s.message()));
      }
      ++ops;
    }
  }
  // The verdict, on stderr: stdout is the program alone.
  std::cerr << "oar inspect: " << ops << " op(s) in " << (*program)->NumBlocks()
            << " block(s), each of a type, slots and attributes Oar runs\n";
  return 0;
}

}  // namespace oar::cli
