// What the fuzz targets share: the seeds they start from and the bytes of a
// VariableMessage as a sender writes them.
//
// Each target defines FuzzSeeds(), the inputs its committed seed corpus
// (tests/fuzz/corpus/<target>/) holds; `<target> --write_seeds DIR` (the
// replay build, fuzz_replay_main.cc) rewrites them.
//
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

#include "common/rpc/var_serde.h"

namespace oar::fuzz {

// The target's seed inputs.
std::vector<std::string> FuzzSeeds();

// `var` (may be null) as the bytes of the VariableMessage a trainer sends.
inline std::string MessageBytes(const std::string& name, const Variable* var, int64_t trainer_id,
                                bool raw_bytes = false, int64_t seq = 0) {
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  meta.set_trainer_id(trainer_id);
  meta.set_oar_seq(seq);
  auto header = rpc::HeaderOf(meta, var, raw_bytes);
  if (!header.ok()) __builtin_trap();
  auto buffer = rpc::SerializeMessage(*header, var);
  if (!buffer.ok()) __builtin_trap();
  std::vector<grpc::Slice> slices;
  if (!buffer->Dump(&slices).ok()) __builtin_trap();
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `first` followed by `rest`: a target's selector byte before its message.
// (Appending, not operator+: GCC 12 warns falsely on `string(1, c) + s`.)
inline std::string Prefixed(char first, const std::string& rest) {
  std::string out(1, first);
  out.append(rest);
  return out;
}

}  // namespace oar::fuzz
