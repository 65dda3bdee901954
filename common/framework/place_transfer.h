// Moving an op's inputs to the place its kernel runs on, as Fluid's data
// transform does: on a GPU executor a fed batch (host) moves to the GPU
// before the first GPU kernel reads it, and a gradient (GPU) moves to the
// host before `send` reads it. The variable itself then holds the moved
// tensor, so later ops on the same place find it there without a copy.
// And the signal by which a GPU kernel hands one call to the CPU kernel.
//
// Thread-safety: the caller runs the op, so it owns the op's variables.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/framework/op_context.h"

namespace oar {

// Every initialised dense input (and a SelectedRows input's value) of
// `binding` that is not where a kernel on `place` can read it is copied
// there and replaces the variable's tensor; a slot bound read_anywhere
// (kReadAnywhere) stays where it lies. A CPU kernel reads any host memory
// (plain or pinned). Errors name the op, the variable and both places.
absl::Status MoveInputsTo(const OpDesc& op, const OpBinding& binding, const Place& place);

// What a GPU kernel returns, before it writes any output, for inputs it
// does not handle but its op's CPU kernel does (elementwise ops under
// numpy's broadcast where Fluid's layout does not fit): the executor then
// moves the inputs to the host and runs the CPU kernel for this call.
absl::Status RunOnHostInstead(const OpDesc& op, absl::string_view why);
bool IsRunOnHostInstead(const absl::Status& s);

// Logs "<message>; it runs its CPU kernel on the host" the first time `key`
// (an op type, with its dtype where that decides) falls back to the host in
// this process: correct but slow, so said once. Thread-safe.
void SayRunsOnHostOnce(const std::string& key, absl::string_view message);

}  // namespace oar
