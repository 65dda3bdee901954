// Serde between Oar variables and Fluid's sendrecv.VariableMessage, in gRPC
// byte buffers. Sending copies nothing of the payload: the message header
// (every field but `serialized`) is encoded by protobuf, and `serialized`
// (field 8) follows as a slice that references the tensor's buffer and keeps
// it alive until gRPC has written it. Receiving copies the payload once,
// straight from gRPC's slices into the destination tensor. Every size is
// checked against the header, so a malformed message is an error, never a
// crash or an over-read.
//
// Thread-safety: stateless functions.
#pragma once

#include <functional>
#include <string>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "common/variable.h"
#include "proto/send_recv.pb.h"

namespace oar::rpc {

struct SendOptions {
  int64_t trainer_id = 0;
  std::string out_varname;
  std::string table_name;
  bool raw_bytes = false;  // send a uint8 tensor as NCCL_ID raw bytes
};

// `var` must hold a Tensor (LoDTensor) or SelectedRows; an empty `var`
// (nothing held) travels as a header only (control messages).
absl::StatusOr<grpc::ByteBuffer> SerializeVar(const std::string& name, const Variable* var,
                                              const SendOptions& options = {});

// A received message: its header and the variable it carried (empty for a
// header-only message).
struct Received {
  sendrecv::VariableMessage meta;  // without `serialized`
  Variable var;
};

// Given the parsed header, a variable whose tensor buffer the payload may
// be copied into (reused when large enough and not shared), so that steady
// traffic allocates nothing; an empty Variable means a fresh buffer.
using SpareFn = std::function<Variable(const sendrecv::VariableMessage& meta)>;

// InvalidArgument naming the variable for a message that does not parse or
// whose payload does not match its header.
absl::StatusOr<Received> DeserializeVar(const grpc::ByteBuffer& buffer, const SpareFn& spare = nullptr);

}  // namespace oar::rpc
