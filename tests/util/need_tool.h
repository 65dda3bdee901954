// OAR_NEED_TOOL(present, what): a test that needs a tool the install script
// provides (promtool, prometheus, python3 with numpy) is skipped where the
// tool is missing — but fails under CI=true, where scripts/install-deps.sh
// ran, so a missing tool there is a broken install, not a choice, and a
// skip would hide that the test never ran.
//
// Thread-safety: test-only macros.
#pragma once

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace oar {

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace oar

#define OAR_NEED_TOOL(present, what)                                                       \
  do {                                                                                     \
    if (!(present)) {                                                                      \
      if (::oar::InCi())                                                                   \
        GTEST_FAIL() << (what)                                                             \
                     << " is missing under CI=true: scripts/install-deps.sh "              \
                        "installs it";                                                     \
      GTEST_SKIP() << (what) << " is not installed (scripts/install-deps.sh installs it)"; \
    }                                                                                      \
  } while (0)
