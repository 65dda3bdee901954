// What the `oar` binary refuses, answers or adjusts before it trains, run as
// a user would: more places than a batch holds, a last batch too small to
// split, gflags' own help and version flags, FLAGS_ variables that do not
// parse, mistyped flags and values, and flags the job's mode never reads.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/util/listen_socket.h"
#include "tests/util/oar_process.h"
#include "tests/util/run_group.h"

namespace oar {
namespace {

// 257 examples in batches of 128 end with a batch of one, which two places
// cannot share: the epoch leaves it out and says so, rather than failing
// after all its work.
TEST(OarCliTest, TwoPlacesLeaveOutALastBatchTheyCannotShare) {
  Result r = Oar("train --epochs 1 --limit 257 --places 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("leaves out its last 1 example(s): fewer than the 2 places"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("256 examples"), std::string::npos) << r.out;
}

// More places than a batch has examples is refused before any place is
// built (a million took the host's memory) and before data is read.
TEST(OarCliTest, MorePlacesThanABatchHoldsIsRefusedAtOnce) {
  Result t = Oar("train --places 1000000 --data_dir /nonexistent/dir");
  EXPECT_EQ(t.code, 1) << t.out;
  EXPECT_NE(t.out.find("--places 1000000 asks for 1000000 places, more than the 128 example(s)"), std::string::npos)
      << t.out;
  EXPECT_EQ(t.out.find("/nonexistent/dir"), std::string::npos) << t.out;
  Result l = Oar("launch --trainers 2 --cpu_num 100000 --data_dir /nonexistent/dir");
  EXPECT_EQ(l.code, 1) << l.out;
  EXPECT_NE(l.out.find("--cpu_num 100000 (a trainer's batch is 64"), std::string::npos) << l.out;
}

// gflags' own --version and --help* flags answer and exit; before, they
// were accepted and a whole training run followed. A FLAGS_ variable that
// does not parse is an error, not the default.
TEST(OarCliTest, VersionAndHelpFlagsNeverStartARun) {
  for (const char* args : {"--version", "train --version --data_dir /nonexistent/dir",
                           "launch --version --trainers 2 --data_dir /nonexistent/dir"}) {
    Result r = Oar(args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("oar ", 0), 0u) << args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
  }
  for (const char* args : {"train --helpshort --data_dir /nonexistent/dir", "train --helpon=train"}) {
    Result r = Oar(args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.out;
    EXPECT_NE(r.out.find("usage: oar train"), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(r.out.find("/nonexistent/dir"), std::string::npos) << args << ": " << r.out;
  }
  Result env = RunCommand("FLAGS_epochs=abc " + OarBinary() + " train --data_dir /nonexistent/dir");
  EXPECT_EQ(env.code, 1) << env.out;
  EXPECT_NE(env.out.find("oar: error: FLAGS_epochs='abc' in the environment: give a whole number"), std::string::npos)
      << env.out;
}

// Each mistake on a command line ends the run with one line that names the
// flag and says what to give (before, gflags printed its own "ERROR: ..."
// lines, a validator added another, and an unknown flag got no hint).
TEST(OarCliTest, AFlagMistakeGetsOneLineThatSaysWhatToGive) {
  const std::pair<std::string, std::string> cases[] = {
      {"train --limit -5", "oar: error: --limit=-5: give a number of examples, or 0 for all"},
      {"train --max_steps=-3", "oar: error: --max_steps=-3: give a number of steps, or 0 for no cap"},
      {"launch --rpc_deadline -5", "oar: error: --rpc_deadline=-5: give a positive number of milliseconds"},
      {"launch --rpc_transport carrier-pigeon", "--rpc_transport=carrier-pigeon: choose auto, grpc, tcp or shm"},
      {"launch --mode nccl2 --collective_transport udp", "--collective_transport=udp: choose auto, tcp or shm"},
      {"train --epochs x", "oar: error: --epochs=x: give a whole number"},
      {"train --sync_mode=maybe", "unknown flag --sync_mode for oar train"},
      {"launch --sync=maybe", "oar: error: --sync=maybe: give true or false"},
      {"train --epochs", "oar: error: --epochs needs a value (give a whole number) before --data_dir; write"},
      {"train --save --epochs 3", "oar: error: --save needs a value (give a value) before --epochs"},
      {"train --epoch 3", "unknown flag --epoch for oar train (did you mean --epochs?); see 'oar train --help'"},
      {"launch --trainer 2", "unknown flag --trainer for oar launch (did you mean --trainers?)"},
      {"train --fed x", "(did you mean --feed?)"},
      {"train --frobnicate", "oar: error: unknown flag --frobnicate for oar train; see 'oar train --help'"},
      {"trian", "oar: error: unknown command 'trian' (did you mean 'train'?)"},
  };
  for (const auto& [args, says] : cases) {
    Result r = Oar(args + " --data_dir /nonexistent/dir");
    EXPECT_NE(r.code, 0) << args << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(r.out.find("ERROR"), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(r.out.find("/nonexistent/dir"), std::string::npos) << args << ": " << r.out;
    if (args != "trian") EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
  }
  // A negated boolean and a flag value after its name still parse: the run
  // gets as far as the data folder.
  Result ok = Oar("launch --nosync --trainers 2 --data_dir /nonexistent/dir");
  EXPECT_NE(ok.out.find("/nonexistent/dir"), std::string::npos) << ok.out;
}

// A pserver whose port something else holds says so in one line naming the
// endpoint, without the page of gRPC log that came before it.
TEST(OarCliTest, APserverOnAPortInUseSaysSoInOneLine) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string ep = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  Result r =
      RunCommand("PADDLE_TRAINING_ROLE=PSERVER PADDLE_PSERVER_ENDPOINTS=" + ep + " PADDLE_CURRENT_ENDPOINT=" + ep +
                 " PADDLE_TRAINERS_NUM=1 " + OarBinary() + " run --limit 100");
  close(fd);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot listen on " + ep + ": Address already in use (something else listens there)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("chttp2"), std::string::npos) << r.out;
}

// Runs a 1-pserver job by hand, as `oar run` processes: a pserver of 2
// trainers (sync, --rpc_deadline 3 s) handed the socket `ps`, and trainer 0
// counting `trainers_num` trainers, with the flag given; the trainer's output
// and exit code.
Result PserverAndTrainer(const HandedSocket& ps, const std::string& trainers_num, const std::string& trainer_flag) {
  const std::vector<std::string> run = {OarBinary(), "run", "--limit=256", "--rpc_deadline=3000"};
  std::vector<std::string> trainer = run;
  if (!trainer_flag.empty()) trainer.push_back(trainer_flag);
  std::vector<ChildRun> runs = RunTogether({{"pserver",
                                             run,
                                             {{"PADDLE_TRAINING_ROLE", "PSERVER"},
                                              {"PADDLE_CURRENT_ENDPOINT", ps.endpoint()},
                                              {"PADDLE_PSERVER_ENDPOINTS", ps.endpoint()},
                                              {"PADDLE_TRAINERS_NUM", "2"}},
                                             {},
                                             {ps.fd}},
                                            {"trainer.0",
                                             trainer,
                                             {{"PADDLE_TRAINING_ROLE", "TRAINER"},
                                              {"PADDLE_TRAINER_ID", "0"},
                                              {"PADDLE_TRAINERS_NUM", trainers_num},
                                              {"PADDLE_PSERVER_ENDPOINTS", ps.endpoint()}}}},
                                           60);
  return {runs[1].code, runs[1].out};
}

// A trainer started with another PADDLE_TRAINERS_NUM than its pserver ends
// at its first message with an error naming both counts (before, it waited
// out the deadline at the barrier, or trained on a different split).
TEST(OarCliTest, ATrainerCountingOtherTrainersThanItsPserverFailsAtOnce) {
  const HandedSocket ps = ListenForChild();
  const std::string ep = ps.endpoint();
  Result r = PserverAndTrainer(ps, "1", "");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("pserver " + ep +
                       " serves 2 trainer(s) (its Fanin) but trainer 0 counts 1 in the job; "
                       "start every trainer and pserver with the same PADDLE_TRAINERS_NUM"),
            std::string::npos)
      << r.out;
}

// A trainer started --async against a sync pserver ends at its first call,
// naming both modes (before, every process waited out the deadline and the
// pserver blamed trainers that were alive).
TEST(OarCliTest, AnAsyncTrainerOfASyncPserverFailsAtOnce) {
  const HandedSocket ps = ListenForChild();
  const std::string ep = ps.endpoint();
  Result r = PserverAndTrainer(ps, "2", "--async");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("pserver " + ep + " trains sync but trainer 0 trains async"), std::string::npos) << r.out;
}

// A flag the command reads, but not in the mode the job runs in, is refused
// too (before, each was silently ignored), before any process starts.
TEST(OarCliTest, AFlagTheModeIgnoresIsRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"launch --mode nccl2 --trainers 2 --no_slice", "--no_slice places variables' blocks on pservers; --mode nccl2"},
      {"launch --mode nccl2 --trainers 2 --split_method hash", "--split_method places variables' blocks"},
      {"launch --trainers 2 --collective_transport shm", "--collective_transport is how nccl2 trainers all-reduce"},
      {"launch --trainers 2 --threads 4", "--threads goes with --data_feed"},
      {"launch --trainers 2 --test_files x", "--test_files goes with --data_feed"},
      {"launch --trainers 2 --dataset in_memory", "--dataset goes with --data_feed"},
      {"launch --trainers 2 --model ctr_dnn_dist --data_feed d --files f --shuffle local",
       "--shuffle applies to trainers that read through the data layer"},
      {"launch --trainers 2 --selected_gpus 0", "--selected_gpus goes with --device gpu"},
      {"transpile --mode nccl2 --trainer_endpoints a:1,b:2 --current_endpoint a:1 --no_slice --out /tmp/x",
       "--no_slice places variables' blocks on pservers"},
      {"train --reduce", "--reduce shapes how several places train; with one place it does nothing"},
      {"train --fuse_elewise_add_act_ops", "--fuse_elewise_add_act_ops shapes how several places train"},
      {"train --selected_gpus 0", "--selected_gpus goes with --device gpu"},
  };
  for (const auto& [args, says] : cases) {
    Result r = Oar(args + (args.rfind("transpile", 0) == 0 ? "" : " --data_dir /nonexistent/dir"));
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
  }
}

}  // namespace
}  // namespace oar
