// Status helpers used across Oar. Every fallible function returns absl::Status
// or absl::StatusOr<T>; these macros propagate errors without boilerplate
// (Debian's Abseil 20220623 ships none of its own).
//
//   OAR_RETURN_IF_ERROR(file.Read(&buf));
//   OAR_ASSIGN_OR_RETURN(Tensor t, LoadTensor(path));
//
// Thread-safety: stateless.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define OAR_STATUS_CONCAT_INNER_(a, b) a##b
#define OAR_STATUS_CONCAT_(a, b) OAR_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` yields a non-OK status.
#define OAR_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status oar_status_ = (expr);       \
    if (!oar_status_.ok()) return oar_status_; \
  } while (0)

// Evaluates `rexpr` (a StatusOr); on error returns its status, otherwise moves
// the value into `lhs`, which may be a declaration.
#define OAR_ASSIGN_OR_RETURN(lhs, rexpr) \
  OAR_ASSIGN_OR_RETURN_IMPL_(OAR_STATUS_CONCAT_(oar_statusor_, __LINE__), lhs, rexpr)
#define OAR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                               \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

// Returns InvalidArgument with the concatenated message unless `cond` holds.
#define OAR_CHECK_ARG(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond)) return ::absl::InvalidArgumentError(::absl::StrCat(__VA_ARGS__)); \
  } while (0)

namespace oar {

// `s` with its message replaced: the same code and payloads (the typed facts
// an error carries, such as which trainer stopped the job:
// common/rpc/status_payloads.h). Non-OK `s` only.
inline absl::Status Rewrap(const absl::Status& s, absl::string_view message) {
  absl::Status out(s.code(), message);
  s.ForEachPayload([&out](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  return out;
}

// Prefixes the message of a non-OK status with `context` ("op mul: ..."),
// keeping its code and payloads.
inline absl::Status Annotate(const absl::Status& s, absl::string_view context) {
  if (s.ok()) return s;
  return Rewrap(s, absl::StrCat(context, ": ", s.message()));
}

}  // namespace oar
