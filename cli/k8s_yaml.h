// The pieces `oar deploy`'s manifests are built from (cli/k8s_manifests.h):
// yaml-cpp nodes for env vars, containers, resources and resource heads,
// and the emitter that writes them with every string Kubernetes needs as a
// string quoted. Internal to the manifest generators.
//
// Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "cli/k8s_manifests.h"

namespace oar::cli {

// A string scalar that a YAML reader would otherwise take for a number or a
// boolean ("2", "true"): tagged so that Emit writes it quoted.
YAML::Node Str(const std::string& v);
void Emit(YAML::Emitter& out, const YAML::Node& node);

YAML::Node Env(const std::string& name, const std::string& value);
YAML::Node EnvFromField(const std::string& name, const std::string& path);
YAML::Node Labels(const DeploySpec& s, const std::string& role);
YAML::Node Resources(const char* cpu, const char* memory, const char* limit);
YAML::Node Container(const DeploySpec& s, const std::string& name, const std::vector<std::string>& args);
YAML::Node Port(int port, const char* name);
// A resource's head: apiVersion, kind, metadata.name and its labels.
YAML::Node Resource(const char* api_version, const char* kind, const std::string& name, const YAML::Node& labels);
// clusterIP None, publishing not-ready addresses, one named port.
YAML::Node HeadlessService(const DeploySpec& s, const std::string& name, const std::string& role, int port,
                           const char* port_name);
// "<pod_prefix>0<domain>:<port>,..." for pods 0..n-1.
std::string Endpoints(const std::string& pod_prefix, const std::string& domain, int n, int port);
// One YAML document with the generated-by header and `about`.
ManifestFile File(const DeploySpec& s, const std::string& filename, const std::string& about, const YAML::Node& doc);

// An elastic job's etcd (the flags every pod's `oar run` is given to join
// it) and its files beside the pservers' (cli/k8s_elastic.cc): etcd's
// Service and StatefulSet, and the trainers' StatefulSet, whose pod i is
// trainer i, with `pserver_endpoints` (nccl2 mode: listening on `port` at
// its pod's stable name).
std::vector<std::string> ElasticArgs(const DeploySpec& s);
std::vector<ManifestFile> ElasticFiles(const DeploySpec& s, const std::string& pserver_endpoints, int port);

}  // namespace oar::cli
