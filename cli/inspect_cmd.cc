// `oar inspect FILE.pb`: prints a serialized program — its blocks, variables
// with types and shapes, and ops with inputs, outputs and attributes — then
// checks every op against the op registry and lists, on stderr, everything
// Oar cannot run in it (grouped by op type and reason, with counts), or says
// that every op passed. `--ops` prints instead the op types the program uses
// (or, without a file, every op type Oar has) with their CPU and GPU
// kernels.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_check.h"
#include "common/framework/program_desc.h"
#include "gflags/gflags.h"

DEFINE_bool(ops, false,
            "print the op types the program uses (without FILE: every op type Oar has), each with its count, "
            "whether Oar has its CPU and GPU kernels, and why Oar refuses it where it does");

namespace oar::cli {
namespace {

const char* YesNo(bool b) { return b ? "yes" : "no"; }

// The op types in `counts` with their kernels, and the refusals beside them.
// GPU: yes (a GPU kernel), host (on a GPU place its CPU kernel runs on the
// host: a host-side op, or one without a GPU kernel) or no.
void PrintOpTable(const std::map<std::string, int>& counts, const std::vector<OpRefusal>& refusals) {
  const OpRegistry& registry = OpRegistry::Global();
  size_t width = 7;
  for (const auto& [type, n] : counts) width = std::max(width, type.size());
  std::printf("%-*s %6s  %-3s  %-3s  %s\n", static_cast<int>(width), "op type", "count", "CPU", "GPU", "refused");
  for (const auto& [type, n] : counts) {
    const OpInfo* info = registry.Find(type);
    const bool host = info != nullptr && info->host_side();
    const bool cpu = info != nullptr && info->HasKernelFor(Place::Kind::kCPU);
    const bool gpu = info != nullptr && info->HasKernelFor(Place::Kind::kCUDA);
    std::string why;
    for (const OpRefusal& r : refusals) {
      if (r.op_type == type) why += (why.empty() ? "" : "; ") + std::to_string(r.count) + "x " + r.reason;
    }
    std::printf("%-*s %6d  %-3s  %-3s  %s\n", static_cast<int>(width), type.c_str(), n, YesNo(cpu),
                gpu && !host ? "yes"
                : cpu        ? "host"
                             : "no",
                why.c_str());
  }
}

}  // namespace

int RunInspect(const std::vector<std::string>& args) {
  if (FLAGS_ops && args.empty()) {
    std::map<std::string, int> all;
    for (const std::string& type : OpRegistry::Global().Types()) all[type] = 0;
    PrintOpTable(all, {});
    return 0;
  }
  if (args.size() != 1) return Fail("usage: oar inspect FILE.pb, or oar inspect --ops [FILE.pb]");
  auto bytes = ReadFileBytes(args[0]);
  if (!bytes.ok()) return Fail(std::string(bytes.status().message()));
  auto program = ProgramDesc::Parse(*bytes);
  if (!program.ok()) return Fail(args[0] + ": " + std::string(program.status().message()));
  const std::vector<OpRefusal> refusals = FindRefusals(**program, OpRegistry::Global());
  size_t ops = 0;
  std::map<std::string, int> counts;
  for (size_t b = 0; b < (*program)->NumBlocks(); ++b) {
    const BlockDesc& block = (*program)->Block(b);
    ops += block.OpSize();
    for (size_t i = 0; i < block.OpSize(); ++i) ++counts[block.Op(i).type];
  }
  if (FLAGS_ops) {
    PrintOpTable(counts, refusals);
  } else {
    std::cout << (*program)->ToString();
  }
  // The verdict, on stderr: stdout is the program (or the table) alone.
  if (absl::Status s = RefusalsError(refusals, args[0]); !s.ok()) return Fail(std::string(s.message()));
  std::cerr << "oar inspect: " << ops << " op(s) in " << (*program)->NumBlocks()
            << " block(s), each of a type, slots and attributes Oar runs\n";
  return 0;
}

}  // namespace oar::cli
