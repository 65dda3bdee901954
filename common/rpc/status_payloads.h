// The typed facts an RPC's error carries beside its code and text, as
// absl::Status payloads whose type URL starts "oar/". They cross every
// transport: gRPC's error_details, the stream protocol's error frame
// (its payload bytes, wire.h), and the in-process transport as they are.
// Code that rewraps an error keeps them (oar::Rewrap, common/base/status.h).
//
// One is defined: a pserver's answer after a trainer's ABORT stopped the job
// names that trainer (kJobStopsUrl), so a trainer that stops because it heard
// it says so in its own ABORT (VariableMessage.oar_abort_origin) instead of
// a pserver matching the answer's wording.
//
//   absl::Status s = JobStops(3, "trainer 3 failed, so the job stops: ...");
//   JobStoppedBy(s) == 3;
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace oar::rpc {

inline constexpr char kJobStopsUrl[] = "oar/job_stops";  // value: the failed trainer's id, decimal

// FAILED_PRECONDITION `message`, naming trainer `failed` as the one whose
// ABORT stopped the job.
absl::Status JobStops(int failed, absl::string_view message);
// The trainer a job-stops answer names; nullopt for any other status.
std::optional<int> JobStoppedBy(const absl::Status& s);

// The "oar/" payloads of `s` as bytes ("" when it has none), and back:
// DecodePayloads sets on `s` each well-formed one of `bytes` (at most
// kMaxPayloads, each URL and value at most 256 bytes; others are dropped —
// a peer's malformed extra never costs the error itself).
inline constexpr size_t kMaxPayloads = 8;
std::string EncodePayloads(const absl::Status& s);
void DecodePayloads(absl::string_view bytes, absl::Status* s);

}  // namespace oar::rpc
