#!/usr/bin/env python3
"""Checks deploy/: the Kubernetes manifests are well-formed and consistent
(the Service and the pservers' and trainers' Jobs agree on names, labels,
ports and counts), and
the environment they give each pod is exactly what `oar run` reads: every
role variable they set is one `oar run --help` lists, and `oar run --dry_run`
given each pod's environment (after Kubernetes' own substitutions) resolves
the role, trainer id and endpoints the pod is meant to have.

Usage: validate_manifests.py --oar build/cli/oar --deploy deploy
Exit 0 when everything holds; otherwise every problem is printed.
"""
import argparse
import os
import re
import subprocess
import sys

import yaml

problems = []


def check(cond, msg):
    if not cond:
        problems.append(msg)
    return cond


def load(deploy, sub=""):
    docs = {}
    k8s = os.path.join(deploy, "k8s", sub)
    for name in sorted(os.listdir(k8s)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(k8s, name)) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                where = "%s: %s" % (name, doc.get("kind"))
                for key in ("apiVersion", "kind", "metadata"):
                    check(key in doc, "%s has no %s" % (where, key))
                check("name" in doc.get("metadata", {}), "%s has no metadata.name" % where)
                # Several Jobs: each by its role ("Job/pserver", "Job/trainer").
                role = doc.get("metadata", {}).get("labels", {}).get("role", "")
                docs[doc["kind"]] = doc
                docs["%s/%s" % (doc["kind"], role)] = doc
    return docs


def container(workload):
    spec = workload["spec"]["template"]["spec"]
    check(len(spec["containers"]) == 1, "%s: one container expected" % workload["kind"])
    return spec["containers"][0]


def pod_env(c, pod_name, annotations):
    """The container's environment as Kubernetes resolves it for one pod
    (`annotations` holds the pod's annotations and labels)."""
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            # $(VAR) refers to a variable defined earlier in the list.
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        else:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            if path == "metadata.name":
                env[e["name"]] = pod_name
            else:
                m = re.match(r"metadata\.(?:annotations|labels)\['(.+)'\]", path)
                check(m is not None, "unsupported fieldRef %s" % path)
                env[e["name"]] = annotations.get(m.group(1), "") if m else ""
    return env


def dry_run(oar, env, args):
    base = {k: v for k, v in os.environ.items() if not k.startswith("PADDLE_") and k not in ("TRAINING_ROLE", "POD_IP")}
    base.update(env)
    r = subprocess.run([oar, "run", "--dry_run"] + args, env=base, capture_output=True, text=True)
    if not check(r.returncode == 0, "oar run --dry_run failed for env %s: %s" % (env, r.stderr.strip())):
        return {}
    return dict(kv.split("=", 1) for kv in r.stdout.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oar", required=True)
    ap.add_argument("--deploy", required=True)
    a = ap.parse_args()
    docs = load(a.deploy)
    for kind in ("Service", "Job/pserver", "Job/trainer"):
        check(kind in docs, "deploy/k8s has no %s" % kind)
    if problems:
        return report()
    svc, ps_job, job = docs["Service"], docs["Job/pserver"], docs["Job/trainer"]

    # Names, labels and ports agree.
    check(svc["spec"].get("clusterIP") == "None", "the pserver Service must be headless (clusterIP: None)")
    check(svc["spec"].get("publishNotReadyAddresses") is True,
          "the pserver Service must publish not-ready addresses (a pserver resolves its own name before it is ready)")
    ps_pod = ps_job["spec"]["template"]
    check(ps_pod["spec"].get("subdomain") == svc["metadata"]["name"],
          "the pserver pods' subdomain must be the Service (their DNS names)")
    check(ps_job["metadata"]["name"] == svc["metadata"]["name"],
          "the pserver Job must share the Service's name (pod i is <job>-i.<service>)")
    labels = ps_pod["metadata"]["labels"]
    for k, v in svc["spec"]["selector"].items():
        check(labels.get(k) == v, "Service selector %s=%s does not match the pserver pods" % (k, v))
    port = svc["spec"]["ports"][0]["port"]
    pc = container(ps_job)
    check(any(p["containerPort"] == port for p in pc.get("ports", [])), "pserver container does not expose %d" % port)
    probe = pc.get("readinessProbe", {}).get("tcpSocket", {}).get("port")
    check(probe == port, "pserver readiness probe is not a TCP check of port %d" % port)
    tc = container(job)
    for c, who in ((pc, "pserver"), (tc, "trainer")):
        check("requests" in c.get("resources", {}), "%s container has no resource requests" % who)
    for j, who in ((ps_job, "pserver"), (job, "trainer")):
        check(j["spec"].get("completionMode") == "Indexed", "%s Job must be Indexed (its index is the pod's id)" % who)
        check(j["spec"]["template"]["spec"].get("restartPolicy") == "Never", "%s pods must not restart in place" % who)
        check(j["spec"].get("parallelism") == j["spec"]["completions"],
              "%s Job parallelism must equal completions (all run at once)" % who)
    trainers = job["spec"]["completions"]
    replicas = ps_job["spec"]["completions"]

    # Every role variable set is one `oar run` reads.
    help_text = subprocess.run([a.oar, "run", "--help"], capture_output=True, text=True).stdout
    m = re.search(r"\(reads ([A-Z_, ]+);", help_text)
    if not check(m is not None, "`oar run --help` does not list the variables it reads"):
        return report()
    reads = set(v.strip() for v in m.group(1).split(","))
    helpers = {"JOB_COMPLETION_INDEX"}  # only used to build PADDLE_CURRENT_ENDPOINT
    for c, who in ((pc, "pserver"), (tc, "trainer")):
        for e in c.get("env", []):
            check(e["name"] in reads or e["name"] in helpers,
                  "%s sets %s, which oar run does not read" % (who, e["name"]))

    # Each pod's environment makes `oar run` resolve the role it should.
    expect_eps = ",".join("%s-%d.%s:%d" % (ps_job["metadata"]["name"], i, svc["metadata"]["name"], port)
                          for i in range(replicas))
    for i in range(replicas):
        pod = "%s-%d" % (ps_job["metadata"]["name"], i)  # its hostname; the pod's name has a suffix
        ann = {"batch.kubernetes.io/job-completion-index": str(i)}
        got = dry_run(a.oar, pod_env(pc, pod + "-abcde", ann), pc.get("args", []))
        if got:
            check(got["role"] == "PSERVER", "%s resolves role %s" % (pod, got["role"]))
            check(got["current_endpoint"] == "%s.%s:%d" % (pod, svc["metadata"]["name"], port),
                  "%s resolves endpoint %s" % (pod, got["current_endpoint"]))
            check(got["pservers"] == expect_eps, "%s sees pservers %s, not %s" % (pod, got["pservers"], expect_eps))
            check(got["trainers"] == str(trainers), "%s expects %s trainers, the Job has %d" % (pod, got["trainers"], trainers))
    for i in range(trainers):
        ann = {"batch.kubernetes.io/job-completion-index": str(i)}
        got = dry_run(a.oar, pod_env(tc, "oar-trainer-%d" % i, ann), tc.get("args", []))
        if got:
            check(got["role"] == "TRAINER", "trainer %d resolves role %s" % (i, got["role"]))
            check(got["trainer_id"] == str(i), "trainer %d resolves trainer_id %s" % (i, got["trainer_id"]))
            check(got["pservers"] == expect_eps, "trainer %d sees pservers %s, not %s" % (i, got["pservers"], expect_eps))
            check(got["trainers"] == str(trainers), "trainer %d expects %s trainers" % (i, got["trainers"]))

    # The image runs `oar run`, built by the project's own script.
    with open(os.path.join(a.deploy, "Dockerfile")) as f:
        docker = f.read()
    check("FROM debian:12" in docker, "the Dockerfile is not based on Debian 12")
    check("scripts/install-deps.sh" in docker, "the Dockerfile does not install with scripts/install-deps.sh")
    check('ENTRYPOINT ["oar", "run"]' in docker, "the image's entrypoint is not `oar run`")
    check_collective(a.oar, a.deploy, reads, helpers)
    return report()


def check_collective(oar, deploy, reads, helpers):
    """deploy/k8s/collective: nccl2 mode's trainers-only job."""
    docs = load(deploy, "collective")
    for kind in ("Service", "Job"):
        check(kind in docs, "deploy/k8s/collective has no %s" % kind)
    if "Service" not in docs or "Job" not in docs:
        return
    svc, job = docs["Service"], docs["Job"]
    where = "collective"
    check(svc["spec"].get("clusterIP") == "None", "%s: the trainers' Service must be headless" % where)
    check(svc["spec"].get("publishNotReadyAddresses") is True, "%s: the Service must publish not-ready addresses" % where)
    pod = job["spec"]["template"]
    for k, v in svc["spec"]["selector"].items():
        check(pod["metadata"]["labels"].get(k) == v, "%s: Service selector %s=%s does not match the trainers" % (where, k, v))
    check(pod["spec"].get("subdomain") == svc["metadata"]["name"],
          "%s: the trainer pods' subdomain must be the Service (their DNS names)" % where)
    check(job["spec"].get("completionMode") == "Indexed", "%s: the Job must be Indexed (trainer id = index)" % where)
    trainers = job["spec"]["completions"]
    check(job["spec"].get("parallelism") == trainers, "%s: parallelism must equal completions (all train at once)" % where)
    port = svc["spec"]["ports"][0]["port"]
    c = container(job)
    check(any(p["containerPort"] == port for p in c.get("ports", [])), "%s: the trainer does not expose %d" % (where, port))
    for e in c.get("env", []):
        check(e["name"] in reads or e["name"] in helpers, "%s sets %s, which oar run does not read" % (where, e["name"]))
    name = job["metadata"]["name"]
    expect = ["%s-%d.%s:%d" % (name, i, svc["metadata"]["name"], port) for i in range(trainers)]
    for i in range(trainers):
        ann = {"batch.kubernetes.io/job-completion-index": str(i)}
        got = dry_run(oar, pod_env(c, "%s-%d-abcde" % (name, i), ann), c.get("args", []))
        if got:
            check(got["role"] == "TRAINER", "%s trainer %d resolves role %s" % (where, i, got["role"]))
            check(got["trainer_id"] == str(i), "%s trainer %d resolves trainer_id %s" % (where, i, got["trainer_id"]))
            check(got["trainers"] == str(trainers), "%s trainer %d expects %s trainers" % (where, i, got["trainers"]))
            check(got["trainer_endpoints"] == ",".join(expect),
                  "%s trainer %d sees trainers %s, not %s" % (where, i, got["trainer_endpoints"], ",".join(expect)))
            check(got["current_endpoint"] == expect[i],
                  "%s trainer %d resolves its endpoint %s, not %s" % (where, i, got["current_endpoint"], expect[i]))


def report():
    for p in problems:
        print("deploy: " + p, file=sys.stderr)
    if not problems:
        print("deploy: manifests and environment check out")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
