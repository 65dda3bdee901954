// `oar deploy`: writes a job's Kubernetes manifests from one description
// (cli/k8s_manifests.h) into --out: plain resources, PaddleFlow's
// PaddleJob, or Kubeflow's PaddleJob.
#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "cli/k8s_manifests.h"
#include "cli/mode_flags.h"
#include "cli/model_build.h"
#include "cli/trainers_flag.h"
#include "cli/transpile_cmd.h"
#include "common/base/status.h"
#include "examples/model_zoo.h"
#include "gflags/gflags.h"

DEFINE_string(image, "", "the container image; its entrypoint is `oar run` (deploy/Dockerfile)");
DEFINE_string(format, "plain",
              "plain (a headless Service and Indexed Jobs), paddle-operator (PaddleFlow's PaddleJob, "
              "pserver mode) or kubeflow (the training-operator's PaddleJob, nccl2 mode)");
DEFINE_string(name, "oar", "the job's name: the prefix of every resource (a DNS label)");
DEFINE_int32(port, 0, "the port pservers (pserver mode) or trainers (nccl2) listen on; 0: 6174 or 6170");
DECLARE_string(pservers);
DECLARE_string(mode);
DECLARE_string(out);
DECLARE_string(model);
DECLARE_int32(epochs);
DECLARE_bool(elastic);  // cli/elastic_launch.cc
DECLARE_bool(async);    // cli/transpile_cmd.cc
DECLARE_bool(runtime_split_send_recv);
DECLARE_bool(half_async);
DECLARE_bool(geo_sgd_mode);
DECLARE_int32(geo_sgd_need_push_nums);

namespace oar::cli {
namespace {

absl::Status Deploy() {
  if (FLAGS_out.empty()) return absl::InvalidArgumentError("--out DIR is required");
  DeploySpec s;
  s.elastic = FLAGS_elastic;
  if (!s.elastic) OAR_RETURN_IF_ERROR(RefuseTrainerRange("oar deploy without --elastic"));
  s.name = FLAGS_name;
  s.trainers = TrainersFromFlag().max;
  s.min_trainers = TrainersFromFlag().min;
  s.image = FLAGS_image;
  s.mode = FLAGS_mode;
  s.format = FLAGS_format;
  s.port = FLAGS_port;
  s.pservers = 0;
  if (s.mode != "nccl2") {
    s.pservers = 1;
    if (FlagGiven("pservers") && (!absl::SimpleAtoi(FLAGS_pservers, &s.pservers) || s.pservers < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pservers takes the number of pservers (>= 1), got '", FLAGS_pservers, "'"));
    }
  } else if (FlagGiven("pservers")) {
    return absl::InvalidArgumentError("--mode nccl2 has no pservers: drop --pservers");
  }
  // What every pod would refuse at its start, refused here instead.
  if (FLAGS_epochs < 1) return absl::InvalidArgumentError("--epochs must be at least 1");
  if (FindModel(FLAGS_model) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", FLAGS_model, "' (available: ", ModelNames(), ")"));
  }
  OAR_RETURN_IF_ERROR(RequireFashionMnistModel(FLAGS_model));
  const std::string epochs = std::to_string(FLAGS_epochs);
  s.pserver_args = {"--model", FLAGS_model};
  s.trainer_args = {"--model", FLAGS_model, "--epochs", epochs};
  if (s.mode == "nccl2") s.trainer_args.insert(s.trainer_args.begin(), {"--mode", "nccl2"});
  if (FLAGS_async) {
    if (s.mode == "nccl2") return absl::InvalidArgumentError("--async trains pserver mode; nccl2 mode is sync");
    for (auto* args : {&s.pserver_args, &s.trainer_args}) args->push_back("--async");
  }
  // Runtime split (with --async, Fluid's communicator), half-async and
  // GEO-SGD: every pod transpiles the program the same way, so each gets
  // them; refused here as every pod would refuse them.
  OAR_ASSIGN_OR_RETURN(const DistributeTranspilerConfig config, TranspilerConfigFromFlags());
  OAR_RETURN_IF_ERROR(RefuseFlagsTheModeIgnores({.nccl2 = s.mode == "nccl2", .geo = config.geo_sgd_mode}));
  std::vector<std::string> modes;
  if (FLAGS_runtime_split_send_recv) modes.push_back("--runtime_split_send_recv");
  if (FLAGS_half_async) modes.push_back("--half_async");
  if (FLAGS_geo_sgd_mode) modes.push_back("--geo_sgd_mode");
  if (FlagGiven("geo_sgd_need_push_nums")) {
    modes.insert(modes.end(), {"--geo_sgd_need_push_nums", std::to_string(FLAGS_geo_sgd_need_push_nums)});
  }
  for (auto* args : {&s.pserver_args, &s.trainer_args}) args->insert(args->end(), modes.begin(), modes.end());
  s.command_line = absl::StrCat(
      "oar deploy --format ", s.format, " --mode ", s.mode,
      s.mode == "nccl2" ? "" : absl::StrCat(" --pservers ", s.pservers), s.elastic ? " --elastic" : "", " --trainers ",
      s.elastic ? absl::StrCat(s.min_trainers, ":", s.trainers) : std::to_string(s.trainers), " --image ", s.image,
      s.name == "oar" ? "" : " --name " + s.name, s.port > 0 ? absl::StrCat(" --port ", s.port) : "", " --model ",
      FLAGS_model, " --epochs ", epochs, FLAGS_async ? " --async" : "", modes.empty() ? "" : " ",
      absl::StrJoin(modes, " "));
  OAR_ASSIGN_OR_RETURN(std::vector<ManifestFile> files, GenerateManifests(s));
  std::error_code ec;
  std::filesystem::create_directories(FLAGS_out, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(FLAGS_out, ": ", ec.message()));
  std::vector<std::string> names;
  for (const auto& f : files) {
    OAR_RETURN_IF_ERROR(WriteFileBytes(FLAGS_out + "/" + f.filename, f.text));
    names.push_back(f.filename);
  }
  std::printf("wrote %s into %s (%s)\n", absl::StrJoin(names, ", ").c_str(), FLAGS_out.c_str(), s.command_line.c_str());
  return absl::OkStatus();
}

}  // namespace

int RunDeploy(const std::vector<std::string>& args) { return RunWithoutArgs("deploy", args, Deploy); }

}  // namespace oar::cli
