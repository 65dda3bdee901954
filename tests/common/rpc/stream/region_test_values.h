// Values for the shared-memory loan tests (lent_region_test.cc,
// lent_sends_test.cc): a patterned float tensor, byte equality, and a
// variable with the checked header a message carrying it has.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "common/framework/tensor.h"
#include "common/framework/variable.h"
#include "common/rpc/message.h"
#include "gtest/gtest.h"

namespace oar::rpc::stream {

// rows x cols floats: base, base + 0.25, base + 0.5, ...
inline Tensor Floats(int64_t rows, int64_t cols, float base) {
  Tensor t;
  float* p = t.mutable_data<float>({rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = base + static_cast<float>(i) * 0.25f;
  return t;
}

inline bool Same(const Tensor& a, const Tensor& b) {
  return a.dims() == b.dims() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// `t` as the message `name` carries it: the variable and its checked header.
inline std::pair<Variable, MessageHeader> MessageOf(const Tensor& t, const std::string& name) {
  Variable var;
  *var.GetMutable<Tensor>() = t;
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  auto h = HeaderOf(meta, &var);
  EXPECT_TRUE(h.ok()) << h.status();
  return {std::move(var), h.ok() ? *std::move(h) : MessageHeader{}};
}

}  // namespace oar::rpc::stream
