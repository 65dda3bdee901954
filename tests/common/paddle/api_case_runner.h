// Replays one API coverage case (tests/paddle_fixtures/api_coverage.py;
// committed under tests/testdata/paddle_api/<dir>/): loads its programs as
// a user's, runs the startup program, loads Paddle's initial persistables,
// feeds Paddle's inputs, and compares each fetched output and gradient with
// Paddle's.
//
//   ApiCaseResult r = RunApiCase(TestdataDir() + "/paddle_api/paddle.abs");
//   r.loads, r.forward, r.gradient   // "yes", "equal", "differs: ..." ...
//
// Thread-safety: test-only; one case at a time per thread.
#pragma once

#include <string>

namespace oar::api_coverage {

// Each field is what the coverage table prints, machine-independent (no
// error magnitudes); `detail` has those for the test's log.
struct ApiCaseResult {
  std::string loads;     // "yes" or "refused: <what Oar refuses>"
  std::string forward;   // "equal", "shapes equal (random)", "differs: ...", "fails: ...", "—"
  std::string gradient;  // "equal", "differs: ...", "none (not differentiable)", "—"
  std::string detail;
  bool covered() const;  // loads and every comparison made holds
};

// Relative tolerance: |oar − paddle| ≤ kTolerance · max(1, |paddle|).
inline constexpr double kTolerance = 1e-5;

ApiCaseResult RunApiCase(const std::string& dir);

}  // namespace oar::api_coverage
