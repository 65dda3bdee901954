// A pserver process for the two-process tests: the fixture's pserver program
// (tests/pserver/dist_fixture.h) on 127.0.0.1:0, its port written to
// --pserver_port_file. Exit 0 when every trainer completed or on SIGTERM,
// 1 with the error otherwise.
#include <cstdio>

#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tests/pserver/dist_fixture.h"

DEFINE_int32(trainers, 2, "trainers (Fanin)");
DEFINE_bool(sync, true, "sync mode");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  oar::DistPrograms d("127.0.0.1:0", FLAGS_trainers, FLAGS_sync);
  oar::Executor exe;
  oar::Scope scope;
  absl::Status s = exe.Run(d.startup.desc(), &scope).status();
  if (s.ok()) s = exe.Run(d.pserver, &scope).status();
  if (!s.ok()) {
    std::fprintf(stderr, "pserver failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
