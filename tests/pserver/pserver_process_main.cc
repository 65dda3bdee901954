// A pserver process for the two-process tests: the fixture's pserver program
// (tests/pserver/dist_fixture.h) on 127.0.0.1:0, its port written to
// --pserver_port_file. Exit 0 when every trainer completed or on SIGTERM,
// 1 with the error otherwise.
#include <cstdio>

#include "common/framework/tensor_io.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tests/pserver/dist_fixture.h"

DEFINE_int32(trainers, 2, "trainers (Fanin)");
DEFINE_bool(sync, true, "sync mode");
DEFINE_string(pserver_port_file, "", "write the bound port here");
DEFINE_int32(rpc_deadline, 180000, "the pserver's barrier and call deadline, in ms");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  oar::DistPrograms d("127.0.0.1:0", FLAGS_trainers, FLAGS_sync);
  oar::ServingNet net(FLAGS_rpc_deadline);
  net.env.on_serving = [](const std::string& ep) {
    if (FLAGS_pserver_port_file.empty()) return absl::OkStatus();
    return oar::WriteFileAtomically(FLAGS_pserver_port_file, ep.substr(ep.rfind(':') + 1) + "\n");
  };
  oar::Executor exe(oar::CPUPlace(), net.options());
  oar::Scope scope;
  absl::Status s = exe.Run(d.startup.desc(), &scope).status();
  if (s.ok()) s = exe.Run(d.pserver, &scope).status();
  if (!s.ok()) {
    std::fprintf(stderr, "pserver failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
