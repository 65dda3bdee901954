#include "cli/k8s_manifests.h"

#include <yaml-cpp/yaml.h>

#include "cli/k8s_yaml.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oar::cli {
namespace {

// An Indexed Job of `pods` pods that run once each (no restart, no retry:
// a failed pod fails the job, as a failed process fails `oar launch`); a
// pod's completion index is its trainer id or pserver index. With a
// `subdomain` (a headless Service's name) pod i is <name>-i.<subdomain>.
YAML::Node IndexedJob(const DeploySpec& s, const std::string& name, const std::string& role, int pods,
                      YAML::Node container, const std::string& subdomain = "") {
  YAML::Node d = Resource("batch/v1", "Job", name, Labels(s, role));
  d["spec"]["completionMode"] = "Indexed";
  d["spec"]["completions"] = pods;
  d["spec"]["parallelism"] = pods;
  d["spec"]["backoffLimit"] = 0;
  d["spec"]["template"]["metadata"]["labels"] = Labels(s, role);
  d["spec"]["template"]["spec"]["restartPolicy"] = "Never";
  d["spec"]["template"]["spec"]["containers"].push_back(container);
  if (!subdomain.empty()) d["spec"]["template"]["spec"]["subdomain"] = subdomain;
  return d;
}

constexpr char kIndexField[] = "metadata.annotations['batch.kubernetes.io/job-completion-index']";

std::vector<ManifestFile> PlainPserver(const DeploySpec& s, int port) {
  const std::string svc = s.name + "-pserver";
  const std::string eps = Endpoints(svc + "-", "." + svc, s.pservers, port);
  YAML::Node ps = Container(s, "pserver", s.pserver_args);
  ps["ports"].push_back(Port(port, "rpc"));
  ps["env"].push_back(EnvFromField("JOB_COMPLETION_INDEX", kIndexField));
  ps["env"].push_back(Env("PADDLE_TRAINING_ROLE", "PSERVER"));
  ps["env"].push_back(Env("PADDLE_TRAINERS_NUM", std::to_string(s.trainers)));
  ps["env"].push_back(Env("PADDLE_PSERVER_ENDPOINTS", eps));
  ps["env"].push_back(Env("PADDLE_CURRENT_ENDPOINT", absl::StrCat(svc, "-$(JOB_COMPLETION_INDEX).", svc, ":", port)));
  ps["readinessProbe"]["tcpSocket"]["port"] = port;
  ps["readinessProbe"]["periodSeconds"] = 2;
  ps["resources"] = Resources("1", "1Gi", "2Gi");

  YAML::Node tr = Container(s, "trainer", s.trainer_args);
  tr["env"].push_back(Env("PADDLE_TRAINING_ROLE", "TRAINER"));
  tr["env"].push_back(EnvFromField("PADDLE_TRAINER_ID", kIndexField));
  tr["env"].push_back(Env("PADDLE_TRAINERS_NUM", std::to_string(s.trainers)));
  tr["env"].push_back(Env("PADDLE_PSERVER_ENDPOINTS", eps));
  tr["resources"] = Resources("2", "2Gi", "4Gi");
  return {File(s, "pserver-service.yaml",
               absl::StrCat("# Stable DNS names for the pservers: ", svc, "-<i>.", svc, ":", port,
                            ". publishNotReadyAddresses:\n# a pserver resolves its own name before it is ready.\n"),
               HeadlessService(s, svc, "pserver", port, "rpc")),
          File(s, "pserver-job.yaml",
               "# The parameter servers: an Indexed Job in the Service's subdomain, so pserver i\n"
               "# has a stable name; its completion index gives its endpoint. Each exits 0 once\n"
               "# every trainer has said COMPLETE, and the Job completes with them.\n",
               IndexedJob(s, svc, "pserver", s.pservers, ps, svc)),
          File(s, "trainer-job.yaml",
               "# The trainers: an Indexed Job whose completion index is the trainer id. A trainer\n"
               "# waits (bounded) for the pservers, trains its shard and says COMPLETE; when\n"
               "# all have, the pservers exit and both Jobs are complete.\n",
               IndexedJob(s, s.name + "-trainer", "trainer", s.trainers, tr))};
}

std::vector<ManifestFile> PlainNccl2(const DeploySpec& s, int port) {
  const std::string name = s.name + "-nccl2";
  YAML::Node tr = Container(s, "trainer", s.trainer_args);
  tr["ports"].push_back(Port(port, nullptr));
  tr["env"].push_back(Env("PADDLE_TRAINING_ROLE", "TRAINER"));
  tr["env"].push_back(EnvFromField("PADDLE_TRAINER_ID", kIndexField));
  tr["env"].push_back(Env("PADDLE_TRAINERS_NUM", std::to_string(s.trainers)));
  tr["env"].push_back(Env("PADDLE_TRAINER_ENDPOINTS", Endpoints(name + "-", "." + name, s.trainers, port)));
  tr["env"].push_back(Env("PADDLE_CURRENT_ENDPOINT", absl::StrCat(name, "-$(PADDLE_TRAINER_ID).", name, ":", port)));
  tr["resources"] = Resources("2", "2Gi", "4Gi");
  YAML::Node job = IndexedJob(s, name, "nccl2-trainer", s.trainers, tr, name);
  return {File(s, "trainer-service.yaml",
               absl::StrCat("# nccl2 mode: stable DNS names for the trainers, ", name, "-<i>.", name, ":", port, ".\n"),
               HeadlessService(s, name, "nccl2-trainer", port, "ring")),
          File(s, "trainer-job.yaml",
               "# nccl2 mode: trainers only. An Indexed Job in the Service's subdomain; the\n"
               "# completion index is the trainer id; every step all-reduces the gradients.\n",
               job)};
}

// PaddleFlow's operator sets the role variables itself (PodIP intranet):
// the manifest only sizes the replicas and names the image and arguments.
std::vector<ManifestFile> PaddleOperator(const DeploySpec& s) {
  YAML::Node d;
  d["apiVersion"] = "batch.paddlepaddle.org/v1";
  d["kind"] = "PaddleJob";
  d["metadata"]["name"] = s.name;
  d["spec"]["cleanPodPolicy"] = "OnCompletion";
  d["spec"]["withGloo"] = 0;
  auto replica = [&](int n, const char* role, const std::vector<std::string>& args, YAML::Node resources) {
    YAML::Node r;
    r["replicas"] = n;
    YAML::Node c = Container(s, "paddle", args);
    c["resources"] = resources;
    r["template"]["metadata"]["labels"] = Labels(s, role);
    r["template"]["spec"]["containers"].push_back(c);
    return r;
  };
  d["spec"]["ps"] = replica(s.pservers, "pserver", s.pserver_args, Resources("1", "1Gi", "2Gi"));
  d["spec"]["worker"] = replica(s.trainers, "trainer", s.trainer_args, Resources("2", "2Gi", "4Gi"));
  return {File(s, "paddlejob.yaml",
               "# PaddleFlow's paddle-operator runs it: it sets TRAINING_ROLE, PADDLE_TRAINER_ID, POD_IP,\n"
               "# PADDLE_PORT, PADDLE_PSERVERS_IP_PORT_LIST and PADDLE_TRAINERS_NUM in every pod.\n",
               d)};
}

// Kubeflow's operator gives pod i of `Worker` the name and Service
// <job>-worker-i; it sets PADDLE_MASTER/PADDLE_NNODES for Paddle's own
// launcher, so the manifest sets what `oar run` reads.
std::vector<ManifestFile> Kubeflow(const DeploySpec& s, int port) {
  const std::string prefix = s.name + "-worker-";
  YAML::Node c = Container(s, "paddle", s.trainer_args);  // the operator requires this name
  c["ports"].push_back(Port(port, "master"));
  c["env"].push_back(Env("PADDLE_TRAINING_ROLE", "TRAINER"));
  c["env"].push_back(EnvFromField("PADDLE_TRAINER_ID", "metadata.labels['training.kubeflow.org/replica-index']"));
  c["env"].push_back(Env("PADDLE_TRAINERS_NUM", std::to_string(s.trainers)));
  c["env"].push_back(Env("PADDLE_TRAINER_ENDPOINTS", Endpoints(prefix, "", s.trainers, port)));
  c["env"].push_back(Env("PADDLE_CURRENT_ENDPOINT", absl::StrCat(prefix, "$(PADDLE_TRAINER_ID):", port)));
  c["resources"] = Resources("2", "2Gi", "4Gi");
  YAML::Node d;
  d["apiVersion"] = "kubeflow.org/v1";
  d["kind"] = "PaddleJob";
  d["metadata"]["name"] = s.name;
  d["spec"]["runPolicy"]["cleanPodPolicy"] = "None";
  d["spec"]["runPolicy"]["backoffLimit"] = 0;
  YAML::Node w;
  w["replicas"] = s.trainers;
  w["restartPolicy"] = "Never";
  w["template"]["spec"]["containers"].push_back(c);
  d["spec"]["paddleReplicaSpecs"]["Worker"] = w;
  return {File(s, "paddlejob.yaml",
               "# Kubeflow's training-operator runs it (nccl2 mode): pod i is <job>-worker-i, with a\n"
               "# Service of that name; the id comes from its replica-index label.\n",
               d)};
}

bool DnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 40 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ManifestFile>> GenerateManifests(const DeploySpec& s) {
  const bool nccl2 = s.mode == "nccl2";
  if (s.mode != "pserver" && !nccl2) {
    return absl::InvalidArgumentError(absl::StrCat("--mode '", s.mode, "': use pserver or nccl2"));
  }
  if (!DnsLabel(s.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--name '", s.name, "' is not a DNS label (lower-case letters, digits and '-', at most 40 characters)"));
  }
  if (s.trainers < 1) return absl::InvalidArgumentError("--trainers must be >= 1");
  if (!nccl2 && s.pservers < 1) return absl::InvalidArgumentError("--pservers must be >= 1 in pserver mode");
  if (s.image.empty()) return absl::InvalidArgumentError("--image is required (the image whose entrypoint is oar run)");
  if (s.image.find_first_of(" \t\n\"'") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--image '", s.image,
                                                   "' holds a space or a quote; an image "
                                                   "reference has none (registry/name:tag)"));
  }
  if (s.port < 0 || s.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port ", s.port, " is not a TCP port (1-65535, or 0 for ", nccl2 ? 6170 : 6174, ")"));
  }
  const int port = s.port > 0 ? s.port : nccl2 ? 6170 : 6174;
  if (s.elastic && s.format != "plain") {
    return absl::InvalidArgumentError(
        "--elastic writes plain manifests (an etcd StatefulSet, trainers as a scalable StatefulSet): drop --format");
  }
  if (s.elastic && (s.min_trainers < 1 || s.min_trainers > s.trainers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trainers ", s.min_trainers, ":", s.trainers, ": MIN must be between 1 and MAX"));
  }
  if (s.format == "plain" && s.elastic && nccl2) {
    DeploySpec e = s;
    for (const std::string& a : ElasticArgs(s)) e.trainer_args.push_back(a);
    return ElasticFiles(e, "", port);
  }
  if (s.format == "plain" && s.elastic) {
    DeploySpec e = s;
    for (auto* args : {&e.pserver_args, &e.trainer_args}) {
      for (const std::string& a : ElasticArgs(s)) args->push_back(a);
    }
    std::vector<ManifestFile> files = PlainPserver(e, port);
    files.pop_back();  // the trainers' Job: a StatefulSet instead
    const std::string svc = s.name + "-pserver";
    for (ManifestFile& f : ElasticFiles(e, Endpoints(svc + "-", "." + svc, s.pservers, port), port)) {
      files.push_back(std::move(f));
    }
    return files;
  }
  if (s.format == "plain") return nccl2 ? PlainNccl2(s, port) : PlainPserver(s, port);
  if (s.format == "paddle-operator") {
    if (nccl2) return absl::InvalidArgumentError("--format paddle-operator runs pserver mode; for nccl2 use kubeflow");
    return PaddleOperator(s);
  }
  if (s.format == "kubeflow") {
    if (!nccl2) {
      return absl::InvalidArgumentError(
          "--format kubeflow runs nccl2 mode (--mode nccl2); for pserver mode use "
          "paddle-operator or plain");
    }
    return Kubeflow(s, port);
  }
  return absl::InvalidArgumentError(absl::StrCat("--format '", s.format, "': use plain, paddle-operator or kubeflow"));
}

}  // namespace oar::cli
