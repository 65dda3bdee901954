// Kubernetes manifests for an Oar job, generated from one description so
// that sizes, names and endpoints cannot disagree (`oar deploy`). Formats:
//   plain            pserver mode: a headless Service + an Indexed Job of
//                    pservers in its subdomain + an Indexed Job of
//                    trainers; nccl2 mode: a headless Service + an Indexed
//                    Job of trainers in its subdomain
//   paddle-operator  PaddleFlow's PaddleJob (batch.paddlepaddle.org/v1) with
//                    `ps` and `worker` replicas, pserver mode: the operator
//                    gives each pod TRAINING_ROLE, PADDLE_TRAINER_ID, POD_IP,
//                    PADDLE_PORT, PADDLE_PSERVERS_IP_PORT_LIST and
//                    PADDLE_TRAINERS_NUM, which `oar run` reads
//   kubeflow         the training-operator's PaddleJob (kubeflow.org/v1),
//                    nccl2 mode: `Worker` replicas in a container named
//                    "paddle"; the operator names pod i <job>-worker-i with a
//                    Service of that name, and the manifest gives `oar run`
//                    its PADDLE_* variables (the id from the pod's
//                    replica-index label)
// With `elastic` (plain, pserver mode): etcd's StatefulSet and Service, the
// pservers' Indexed Job, and the trainers' StatefulSet, scalable.
// Documents are built as yaml-cpp nodes and written by its emitter.
//
//   OAR_ASSIGN_OR_RETURN(auto files, GenerateManifests({.pservers = 2, .trainers = 2, .image = "oar:1"}));
//   for (const auto& f : files) WriteFile(dir + "/" + f.filename, f.text);
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar::cli {

struct DeploySpec {
  std::string name = "oar";  // prefix of every resource name
  int pservers = 1;          // pserver mode
  int trainers = 1;
  std::string image = "oar:latest";
  std::string mode = "pserver";           // pserver | nccl2
  std::string format = "plain";           // plain | paddle-operator | kubeflow
  int port = 0;                           // 0: 6174 (pserver mode), 6170 (nccl2)
  std::vector<std::string> pserver_args;  // after `oar run` (the image's entrypoint)
  std::vector<std::string> trainer_args;
  std::string command_line;  // the `oar deploy` command, quoted in each file's header
  // An elastic job (pserver mode, async): an etcd StatefulSet, and trainers
  // as a StatefulSet a user may `kubectl scale` between min_trainers and
  // `trainers` (its args carry --elastic_server, --job_id, --trainers).
  bool elastic = false;
  int min_trainers = 1;
};

struct ManifestFile {
  std::string filename;  // "pserver-job.yaml"
  std::string text;      // YAML, one document, a header comment first
};

// InvalidArgument naming the field for a size < 1, an empty image or one
// with a space or quote, a port outside 0-65535, a name that is not a DNS
// label, or a format that does not run the mode
// (paddle-operator: pserver; kubeflow: nccl2; elastic: plain pserver).
absl::StatusOr<std::vector<ManifestFile>> GenerateManifests(const DeploySpec& spec);

}  // namespace oar::cli
