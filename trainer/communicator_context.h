// What Fluid's communicator sends and receives, read from a transpiled
// trainer program: each `send` op's inputs (a gradient, cut at run time
// into the blocks `send_varnames` by the rows in `sections`, or blocks a
// split op already cut, one per input) and each `recv` op's outputs (a
// parameter stacked from `recv_varnames`, or one block per output). Fluid
// builds the same tables from the program (`Communicator(program)`).
//
//   OAR_ASSIGN_OR_RETURN(CommunicatorContexts c, ContextsOf(trainer_program));
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/program_desc.h"

namespace oar {

// A variable of the trainer's scope and the pserver variables it is sent
// as or received from.
struct VarContext {
  std::string name;                 // in the trainer's scope
  std::vector<std::string> blocks;  // on the pservers (one: the whole variable)
  std::vector<std::string> epmap;   // block i lives on epmap[i]
  std::vector<int64_t> sections;    // rows of each block; empty: sent whole
  int32_t trainer_id = 0;
  bool merge_add = false;  // send: the op's merge_add (Fluid 1.7+): always summed
};

struct CommunicatorContexts {
  std::map<std::string, VarContext> send, recv;  // by name
};

// InvalidArgument naming the op for a send or recv whose attributes do not
// line up (as many endpoints as blocks; sections that sum to nothing).
absl::StatusOr<CommunicatorContexts> ContextsOf(const ProgramDesc& trainer_program);

}  // namespace oar
