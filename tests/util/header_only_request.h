// A request that is only a header naming `name` (a Get, a barrier): what
// transport tests send when the payload does not matter.
//
// Thread-safety: a free function; the message is immutable once made.
#pragma once

#include <memory>
#include <string>

#include "common/rpc/message.h"
#include "gtest/gtest.h"

namespace oar::rpc {

inline std::shared_ptr<const OutgoingMessage> HeaderOnlyRequest(const std::string& name) {
  auto r = std::make_shared<OutgoingMessage>();
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  auto h = HeaderOf(std::move(meta), nullptr);
  EXPECT_TRUE(h.ok()) << h.status();
  r->header = *std::move(h);
  return r;
}

}  // namespace oar::rpc
