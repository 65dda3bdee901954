// `oar deploy --elastic`: what an elastic job adds to the plain manifests
// (pserver mode: beside the pservers' Job; nccl2 mode: the trainers alone,
// each listening on its pod's stable name). etcd runs from the job's own image (Debian's etcd-server is in
// it) as a one-replica StatefulSet with a volume, so a restarted etcd pod
// keeps the job's members and chunks; the trainers are a StatefulSet whose
// pod index is the trainer id, so `kubectl scale statefulset <name>-trainer
// --replicas N` (MIN <= N <= MAX) takes trainers away or adds them.
#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "cli/k8s_yaml.h"

namespace oar::cli {
namespace {

constexpr int kEtcdPort = 2379;

std::string EtcdName(const DeploySpec& s) { return s.name + "-etcd"; }

// A one-replica-or-more StatefulSet's head and selector.
YAML::Node StatefulSet(const DeploySpec& s, const std::string& name, const std::string& role, int replicas,
                       const std::string& service) {
  YAML::Node d = Resource("apps/v1", "StatefulSet", name, Labels(s, role));
  d["spec"]["serviceName"] = service;
  d["spec"]["replicas"] = replicas;
  d["spec"]["podManagementPolicy"] = "Parallel";
  d["spec"]["selector"]["matchLabels"] = Labels(s, role);
  d["spec"]["template"]["metadata"]["labels"] = Labels(s, role);
  return d;
}

}  // namespace

std::vector<std::string> ElasticArgs(const DeploySpec& s) {
  const std::string etcd = EtcdName(s);
  return {"--elastic_server", absl::StrCat("etcd://", etcd, "-0.", etcd, ":", kEtcdPort),
          "--job_id",         s.name,
          "--trainers",       absl::StrCat(s.min_trainers, ":", s.trainers)};
}

std::vector<ManifestFile> ElasticFiles(const DeploySpec& s, const std::string& pserver_endpoints, int port) {
  const bool nccl2 = s.mode == "nccl2";
  const std::string etcd = EtcdName(s);
  YAML::Node e;
  e["name"] = "etcd";
  e["image"] = s.image;
  e["command"].push_back("etcd");
  const std::string client = absl::StrCat("http://", etcd, "-0.", etcd, ":", kEtcdPort);
  const std::string peer = "http://localhost:2380";  // one member: its peers' port stays in the pod
  for (const std::string& a :
       {absl::StrCat("--name=", etcd, "-0"), std::string("--data-dir=/var/lib/etcd/data"),
        absl::StrCat("--listen-client-urls=http://0.0.0.0:", kEtcdPort),
        absl::StrCat("--advertise-client-urls=", client), "--listen-peer-urls=" + peer,
        "--initial-advertise-peer-urls=" + peer, absl::StrCat("--initial-cluster=", etcd, "-0=", peer)}) {
    e["args"].push_back(a);
  }
  e["ports"].push_back(Port(kEtcdPort, "client"));
  e["readinessProbe"]["tcpSocket"]["port"] = kEtcdPort;
  e["readinessProbe"]["periodSeconds"] = 2;
  e["resources"] = Resources("100m", "256Mi", "1Gi");
  YAML::Node mount;
  mount["name"] = "data";
  mount["mountPath"] = "/var/lib/etcd";
  e["volumeMounts"].push_back(mount);
  YAML::Node ets = StatefulSet(s, etcd, "etcd", 1, etcd);
  ets["spec"]["template"]["spec"]["securityContext"]["fsGroup"] = 65534;  // the image's user writes the volume
  ets["spec"]["template"]["spec"]["containers"].push_back(e);
  YAML::Node claim;
  claim["metadata"]["name"] = "data";
  claim["spec"]["accessModes"].push_back("ReadWriteOnce");
  claim["spec"]["resources"]["requests"]["storage"] = "1Gi";
  ets["spec"]["volumeClaimTemplates"].push_back(claim);

  const std::string trainers = s.name + "-trainer";
  YAML::Node tr = Container(s, "trainer", s.trainer_args);
  tr["env"].push_back(Env("PADDLE_TRAINING_ROLE", "TRAINER"));
  tr["env"].push_back(EnvFromField("PADDLE_TRAINER_ID", "metadata.labels['apps.kubernetes.io/pod-index']"));
  tr["env"].push_back(Env("PADDLE_TRAINERS_NUM", std::to_string(s.trainers)));
  if (nccl2) {  // every slot's stable name: a ring holds those of its trainers
    tr["ports"].push_back(Port(port, "ring"));
    tr["env"].push_back(Env("PADDLE_TRAINER_ENDPOINTS", Endpoints(trainers + "-", "." + trainers, s.trainers, port)));
    tr["env"].push_back(
        Env("PADDLE_CURRENT_ENDPOINT", absl::StrCat(trainers, "-$(PADDLE_TRAINER_ID).", trainers, ":", port)));
  } else {
    tr["env"].push_back(Env("PADDLE_PSERVER_ENDPOINTS", pserver_endpoints));
  }
  tr["resources"] = Resources("2", "2Gi", "4Gi");
  YAML::Node tss = StatefulSet(s, trainers, "trainer", s.trainers, trainers);
  tss["spec"]["template"]["spec"]["containers"].push_back(tr);
  YAML::Node tsvc = nccl2 ? HeadlessService(s, trainers, "trainer", port, "ring")
                          : Resource("v1", "Service", trainers, Labels(s, "trainer"));
  tsvc["spec"]["clusterIP"] = "None";
  tsvc["spec"]["selector"] = Labels(s, "trainer");

  return {File(s, "etcd-service.yaml",
               absl::StrCat("# The elastic job's etcd: ", etcd, "-0.", etcd, ":", kEtcdPort,
                            ", where every pod registers and the trainers take\n# their data chunks.\n"),
               HeadlessService(s, etcd, "etcd", kEtcdPort, "client")),
          File(s, "etcd-statefulset.yaml",
               "# etcd from the job's own image (Debian's etcd-server), one replica with a volume: a\n"
               "# restarted etcd pod keeps the job's members and chunks (members re-register if not).\n",
               ets),
          File(s, "trainer-service.yaml",
               nccl2 ? absl::StrCat("# nccl2 mode: stable DNS names for the trainers, ", trainers, "-<i>.", trainers,
                                    ":", port, " (a ring's\n# trainers connect to each other there).\n")
                     : std::string("# The trainers' StatefulSet's governing Service (the trainers serve nothing).\n"),
               tsvc),
          File(s, "trainer-statefulset.yaml",
               absl::StrCat("# The trainers: pod i is trainer i. `kubectl scale statefulset ", trainers,
                            " --replicas N`\n# (", s.min_trainers, " <= N <= ", s.trainers,
                            ") takes trainers away or adds them while the job runs; ",
                            nccl2 ? "the others roll back to\n# their last commit (or wait for the next one) and "
                                    "form a new ring. The job is done when the\n# trainers say so in their logs "
                                    "(\"@oar result\"): then delete this StatefulSet (a\n# StatefulSet restarts "
                                    "pods that end; a trainer started after the job's end exits at once).\n"
                                  : "a trainer that is\n# gone leaves its data chunk to the others. The job is done "
                                    "when the pserver Job\n# is complete: then delete this StatefulSet (a "
                                    "StatefulSet restarts pods that end).\n"),
               tss)};
}

}  // namespace oar::cli
