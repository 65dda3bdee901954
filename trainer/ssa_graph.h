// The SSA graph of a data-parallel step: every op of the block replicated
// once per place (compute op handles), plus one all-reduce handle per
// gradient and place (each sums one slice, so the places share the work) (found through op_role_var, as Fluid's
// multi-device pass does), placed after the gradient's last writer. Each variable on each place gets a new version
// (VarHandle) per write; an op handle depends on the writers of the versions it reads (read-after-write), on the
// readers of a version it overwrites (write-after-read) and on its previous writer. In a transpiled trainer program the
// RPC and Dist ops (split_byref, send, barriers, recv, concat) run on place 0 only, and every persistable variable they
// write (the parameters pulled back) is then broadcast from place 0; kReduce becomes kAllReduce there, so place 0 sends
// the full sums.
//
// Thread-safety: immutable after BuildSsaGraph.
#pragma once

#include <string>
#include <vector>

#include "common/framework/program_desc.h"

namespace oar {

struct VarHandle {
  std::string name;
  size_t place;
  int version;
  int generated_by;  // op handle index, -1 for values present before the step
};

struct OpHandle {
  // kAllReduce: every place gets the sum of `var` over places.
  // kReduce: the sum lands on `place` (the gradient's owner) only.
  // kBroadcast: `var` (a parameter) is copied from `place` to the others.
  // kCrossAllReduce: `vars` (one gradient, or a bucket of them) on place 0
  //   summed over the trainers through the collective; handles of this kind
  //   run in `cross_index` order on every trainer, asynchronously.
  enum class Kind { kCompute, kAllReduce, kReduce, kBroadcast, kCrossAllReduce };
  Kind kind = Kind::kCompute;
  size_t place = 0;     // kCompute: where it runs; kReduce/kBroadcast: the owner
  size_t op_index = 0;  // kCompute: index into the block
  std::string var;      // kAllReduce: the gradient summed across places
  size_t chunk = 0;     // kAllReduce: this handle sums slice `chunk` of `chunks`
  size_t chunks = 1;
  std::vector<std::string> vars;  // kCrossAllReduce: the gradients, packed in this order
  size_t cross_index = 0;         // kCrossAllReduce: its place in the trainers' common order
  std::string label;              // "mul #3 @place 1", "all_reduce(fc_0.w_0@GRAD)"
  std::vector<size_t> deps;
  std::vector<size_t> dependents;
};

struct SsaGraph {
  size_t places = 0;
  std::vector<OpHandle> ops;
  std::vector<VarHandle> vars;
  std::vector<std::string> gradients;  // those all-reduced, in program order
  size_t cross_ops = 0;                // kCrossAllReduce handles
};

enum class GradientMode {
  kNone,       // one place: no communication
  kAllReduce,  // sum everywhere; every place runs every optimize op
  kReduce,     // each gradient summed onto one owner place (round robin), only
               // the owner runs that parameter's optimize ops, then broadcasts it
};

// Across trainers (nccl2 mode): every gradient is reduced onto place 0,
// all-reduced among the trainers there, and broadcast back to the other
// places (hierarchical). Dense gradients are packed into buckets of up to
// `bucket_bytes` (0: one all-reduce per gradient), in the order backward
// writes them; a bucket goes out as soon as its last gradient is written.
struct CrossTrainer {
  bool enabled = false;
  int64_t bucket_bytes = 0;
};

SsaGraph BuildSsaGraph(const BlockDesc& block, size_t places, GradientMode mode, CrossTrainer cross = {});

// The graph as Graphviz dot: one node per op handle (all-reduce handles as
// boxes), one edge per dependency.
std::string ToGraphviz(const SsaGraph& graph);

}  // namespace oar
