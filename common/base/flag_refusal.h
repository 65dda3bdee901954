// Why a gflags validator refused a value. A validator calls
// RefuseFlagValue with what a person should give instead ("give a positive
// number of milliseconds") and returns its false; the oar CLI, which tries
// each flag before gflags parses the command line, takes that sentence and
// prints one error line naming the flag and the value. A binary that parses
// with gflags alone gets gflags' own "failed validation" line instead.
//
// Thread-safety: both functions may be called from any thread (a mutex
// guards the one stored sentence); flags are set on the main thread before
// other threads start, so the sentence taken is the one just refused.
#pragma once

#include <string>

namespace oar {

// Stores `why` as the reason for the latest refusal; returns false, the
// validator's answer.
bool RefuseFlagValue(std::string why);

// The reason stored by the latest refusal, or "" (a value the flag's type
// could not parse: no validator ran); clears it.
std::string TakeFlagRefusal();

}  // namespace oar
