#!/usr/bin/env python3
"""Checks `oar deploy`: the manifests it generates for several sizes and
every format are consistent and give each pod the role it should have.

- plain, pserver and nccl2 mode, at 2x2, 3x1 and 1x4: generated into a
  scratch deploy/ tree and put through validate_manifests.py's checks
  (names, labels, ports, counts; `oar run --dry_run` per pod);
- the committed deploy/k8s files are exactly what `oar deploy` writes for
  them (they are generated, not hand-kept);
- paddle-operator (pserver mode): each ps and worker pod, given the
  variables PaddleFlow's operator sets (controllers/paddlejob_helper.go:
  TRAINING_ROLE, PADDLE_TRAINING_ROLE, PADDLE_TRAINER_ID, POD_IP, and from
  its ConfigMap PADDLE_PORT, PADDLE_PSERVERS_IP_PORT_LIST,
  PADDLE_TRAINER_ENDPOINTS, PADDLE_TRAINERS, PADDLE_TRAINERS_NUM,
  TRAINER_PORTS_NUM), resolves its role, id and endpoints;
- elastic (--elastic --trainers MIN:MAX): etcd's StatefulSet, its Service
  and the URL every pod joins agree; the trainers are a StatefulSet of MAX
  replicas whose pod i (its pod-index label) resolves trainer i, and every
  pod's `oar run` gets --async (and the communicator's or GEO-SGD's
  flags when given), the etcd URL, the job id and MIN:MAX;
  in nccl2 mode the trainers alone, pod i resolving trainer i and every
  slot's stable name as the ring's endpoints;
- kubeflow (nccl2 mode): each Worker pod, given the operator's variables
  (PADDLE_JOB_ID, PADDLE_NNODES, PADDLE_MASTER, POD_IP_DUMMY) and its
  replica-index label, resolves its id and the ring's endpoints.

Usage: validate_generated.py --oar build/cli/oar --source .
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_manifests as vm  # noqa: E402

check = vm.check


def deploy(oar, out, *args):
    r = subprocess.run([oar, "deploy", "--out", out] + list(args), capture_output=True, text=True)
    check(r.returncode == 0, "oar deploy %s failed: %s" % (" ".join(args), r.stderr.strip()))
    return r.returncode == 0


def one_doc(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    check(len(docs) == 1, "%s: one document expected" % path)
    return docs[0]


def plain(oar, source, tmp, pservers, trainers):
    d = os.path.join(tmp, "plain_%d_%d" % (pservers, trainers))
    shutil.copytree(os.path.join(source, "deploy"), d)
    common = ["--image", "oar:latest", "--epochs", "2"]
    if deploy(oar, os.path.join(d, "k8s"), "--pservers", str(pservers), "--trainers", str(trainers), *common) and \
            deploy(oar, os.path.join(d, "k8s", "collective"), "--mode", "nccl2", "--trainers", str(trainers), *common):
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "validate_manifests.py"),
                            "--oar", oar, "--deploy", d], capture_output=True, text=True)
        check(r.returncode == 0, "plain %dx%d: %s" % (pservers, trainers, r.stderr.strip()))


def committed_are_generated(oar, source, tmp):
    out = os.path.join(tmp, "committed")
    common = ["--image", "oar:latest", "--epochs", "2"]
    if not (deploy(oar, out, "--pservers", "2", "--trainers", "2", *common) and
            deploy(oar, os.path.join(out, "collective"), "--mode", "nccl2", "--trainers", "2", *common)):
        return
    for sub in ("", "collective"):
        here, there = os.path.join(source, "deploy", "k8s", sub), os.path.join(out, sub)
        for name in sorted(os.listdir(there)):
            if not name.endswith(".yaml"):
                continue
            with open(os.path.join(there, name)) as a:
                want = a.read()
            path = os.path.join(here, name)
            got = open(path).read() if os.path.exists(path) else None
            check(got == want, "deploy/k8s/%s differs from what `oar deploy` writes: regenerate it (its header says how)"
                  % os.path.join(sub, name))


def paddle_operator(oar, tmp, pservers, trainers):
    out = os.path.join(tmp, "paddleflow_%d_%d" % (pservers, trainers))
    if not deploy(oar, out, "--format", "paddle-operator", "--pservers", str(pservers), "--trainers", str(trainers),
                  "--image", "oar:1", "--name", "ctr"):
        return
    job = one_doc(os.path.join(out, "paddlejob.yaml"))
    check(job["apiVersion"] == "batch.paddlepaddle.org/v1" and job["kind"] == "PaddleJob", "not PaddleFlow's PaddleJob")
    spec = job["spec"]
    check(spec["ps"]["replicas"] == pservers and spec["worker"]["replicas"] == trainers, "replicas do not match")
    port = "41234"  # the operator draws one port per job
    ps_ips = ["10.1.0.%d" % (i + 1) for i in range(pservers)]
    w_ips = ["10.2.0.%d" % (i + 1) for i in range(trainers)]
    config = {"TRAINER_PORTS_NUM": "20", "PADDLE_PORT": port,
              "PADDLE_PSERVERS_IP_PORT_LIST": ",".join("%s:%s" % (ip, port) for ip in ps_ips),
              "PADDLE_TRAINER_ENDPOINTS": ",".join("%s:%s" % (ip, port) for ip in w_ips),
              "PADDLE_TRAINERS": ",".join(w_ips), "PADDLE_TRAINERS_NUM": str(trainers)}
    for kind, role, ips in (("ps", "PSERVER", ps_ips), ("worker", "TRAINER", w_ips)):
        c = spec[kind]["template"]["spec"]["containers"][0]
        for i, ip in enumerate(ips):
            env = dict(config, TRAINING_ROLE=role, PADDLE_TRAINING_ROLE=role, PADDLE_TRAINER_ID=str(i), POD_IP=ip)
            env.update(vm.pod_env(c, "ctr-%s-%d" % (kind, i), {}))
            got = vm.dry_run(oar, env, c.get("args", []))
            if not got:
                continue
            where = "paddle-operator %s-%d" % (kind, i)
            check(got["role"] == role, "%s resolves role %s" % (where, got["role"]))
            check(got["pservers"] == config["PADDLE_PSERVERS_IP_PORT_LIST"], "%s sees pservers %s" % (where, got["pservers"]))
            check(got["trainers"] == str(trainers), "%s expects %s trainers" % (where, got["trainers"]))
            if role == "PSERVER":
                check(got["current_endpoint"] == "%s:%s" % (ip, port), "%s binds %s" % (where, got["current_endpoint"]))
            else:
                check(got["trainer_id"] == str(i), "%s resolves trainer_id %s" % (where, got["trainer_id"]))


def kubeflow(oar, tmp, trainers):
    out = os.path.join(tmp, "kubeflow_%d" % trainers)
    if not deploy(oar, out, "--format", "kubeflow", "--mode", "nccl2", "--trainers", str(trainers), "--image", "oar:1",
                  "--name", "ring"):
        return
    job = one_doc(os.path.join(out, "paddlejob.yaml"))
    check(job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PaddleJob", "not Kubeflow's PaddleJob")
    worker = job["spec"]["paddleReplicaSpecs"]["Worker"]
    check(worker["replicas"] == trainers, "Worker replicas do not match")
    c = worker["template"]["spec"]["containers"][0]
    check(c["name"] == "paddle", "the training-operator needs a container named paddle")
    port = [p["containerPort"] for p in c.get("ports", []) if p.get("name") == "master"]
    check(len(port) == 1, "the paddle container has no port named master")
    expect = ["ring-worker-%d:%d" % (i, port[0]) for i in range(trainers)] if port else []
    for i in range(trainers):
        env = {"PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": "ring", "PADDLE_NNODES": str(trainers),
               "PADDLE_MASTER": "ring-worker-0:%d" % port[0] if port else ""}
        if i == 0:
            env["POD_IP_DUMMY"] = "10.3.0.1"
        env.update(vm.pod_env(c, "ring-worker-%d" % i, {"training.kubeflow.org/replica-index": str(i)}))
        got = vm.dry_run(oar, env, c.get("args", []))
        if got:
            where = "kubeflow worker %d" % i
            check(got["role"] == "TRAINER" and got["trainer_id"] == str(i), "%s resolves %s %s" % (where, got["role"], got["trainer_id"]))
            check(got["trainer_endpoints"] == ",".join(expect), "%s sees trainers %s" % (where, got["trainer_endpoints"]))
            check(got["current_endpoint"] == expect[i], "%s resolves its endpoint %s" % (where, got["current_endpoint"]))


def elastic(oar, tmp, pservers, low, high, async_, modes=()):
    out = os.path.join(tmp, "elastic_%d_%d_%d_%d" % (pservers, low, high, len(modes)))
    if not deploy(oar, out, "--elastic", "--pservers", str(pservers), "--trainers", "%d:%d" % (low, high),
                  "--image", "oar:1", "--name", "ej", *(["--async"] if async_ else []), *modes):
        return
    docs = {name: one_doc(os.path.join(out, name)) for name in sorted(os.listdir(out))}
    check(sorted(docs) == ["etcd-service.yaml", "etcd-statefulset.yaml", "pserver-job.yaml", "pserver-service.yaml",
                           "trainer-service.yaml", "trainer-statefulset.yaml"], "elastic files: %s" % sorted(docs))
    etcd_svc, etcd = docs["etcd-service.yaml"], docs["etcd-statefulset.yaml"]
    trainers, ps_job = docs["trainer-statefulset.yaml"], docs["pserver-job.yaml"]
    check(etcd_svc["spec"].get("clusterIP") == "None", "etcd's Service must be headless (pod 0's DNS name)")
    check(etcd["spec"]["serviceName"] == etcd_svc["metadata"]["name"], "etcd's StatefulSet is not governed by its Service")
    check(etcd["spec"]["replicas"] == 1 and etcd["spec"].get("volumeClaimTemplates"), "etcd: one replica with a volume")
    port = etcd_svc["spec"]["ports"][0]["port"]
    url = "etcd://%s-0.%s:%d" % (etcd["metadata"]["name"], etcd_svc["metadata"]["name"], port)
    ec = etcd["spec"]["template"]["spec"]["containers"][0]
    check("--advertise-client-urls=http://%s" % url[len("etcd://"):] in ec["args"],
          "etcd advertises another URL than %s" % url)
    check(trainers["spec"]["serviceName"] == docs["trainer-service.yaml"]["metadata"]["name"],
          "the trainers' StatefulSet is not governed by its Service")
    check(trainers["spec"]["replicas"] == high, "the trainers' StatefulSet has %s replicas, not MAX %d"
          % (trainers["spec"]["replicas"], high))
    for k, v in trainers["spec"]["selector"]["matchLabels"].items():
        check(trainers["spec"]["template"]["metadata"]["labels"].get(k) == v, "trainer selector %s does not match" % k)
    want = ["--elastic_server", url, "--job_id", "ej", "--trainers", "%d:%d" % (low, high)]
    tc = trainers["spec"]["template"]["spec"]["containers"][0]
    pc = vm.container(ps_job)
    for c, who in ((tc, "trainer"), (pc, "pserver")):
        args = c.get("args", [])
        check(args[-len(want):] == want, "the %s's args %s do not end with %s" % (who, args, want))
        check(("--async" in args) == async_, "the %s's args %s: async is %s" % (who, args, async_))
        check(all(m in args for m in modes), "the %s's args %s lack %s" % (who, args, list(modes)))
    eps = None
    for i in range(pservers):
        env = vm.pod_env(pc, "ej-pserver-%d" % i, {"batch.kubernetes.io/job-completion-index": str(i)})
        got = vm.dry_run(oar, env, pc.get("args", []))
        if got:
            check(got["role"] == "PSERVER" and got["trainers"] == str(high), "elastic pserver %d resolves %s" % (i, got))
            eps = got["pservers"]
    for i in range(high):
        env = vm.pod_env(tc, "ej-trainer-%d" % i, {"apps.kubernetes.io/pod-index": str(i)})
        got = vm.dry_run(oar, env, tc.get("args", []))
        if got:
            where = "elastic trainer pod %d" % i
            check(got["role"] == "TRAINER" and got["trainer_id"] == str(i), "%s resolves %s" % (where, got))
            check(got["pservers"] == eps, "%s sees pservers %s, the pservers %s" % (where, got["pservers"], eps))


def elastic_nccl2(oar, tmp, low, high):
    out = os.path.join(tmp, "elastic_nccl2_%d_%d" % (low, high))
    if not deploy(oar, out, "--elastic", "--mode", "nccl2", "--trainers", "%d:%d" % (low, high), "--image", "oar:1",
                  "--name", "er"):
        return
    docs = {name: one_doc(os.path.join(out, name)) for name in sorted(os.listdir(out))}
    check(sorted(docs) == ["etcd-service.yaml", "etcd-statefulset.yaml", "trainer-service.yaml",
                           "trainer-statefulset.yaml"], "elastic nccl2 files: %s" % sorted(docs))
    etcd_svc, etcd = docs["etcd-service.yaml"], docs["etcd-statefulset.yaml"]
    svc, trainers = docs["trainer-service.yaml"], docs["trainer-statefulset.yaml"]
    url = "etcd://%s-0.%s:%d" % (etcd["metadata"]["name"], etcd_svc["metadata"]["name"], etcd_svc["spec"]["ports"][0]["port"])
    check(svc["spec"].get("clusterIP") == "None", "the trainers' Service must be headless (their pods' DNS names)")
    check(trainers["spec"]["serviceName"] == svc["metadata"]["name"], "the trainers' StatefulSet is not governed by its Service")
    check(trainers["spec"]["replicas"] == high, "the trainers' StatefulSet has %s replicas, not MAX %d"
          % (trainers["spec"]["replicas"], high))
    tc = trainers["spec"]["template"]["spec"]["containers"][0]
    port = [p["containerPort"] for p in tc.get("ports", [])]
    check(len(port) == 1 and svc["spec"]["ports"][0]["port"] == port[0], "the trainer's port and its Service's differ")
    want = ["--elastic_server", url, "--job_id", "er", "--trainers", "%d:%d" % (low, high)]
    args = tc.get("args", [])
    check(args[-len(want):] == want, "the trainer's args %s do not end with %s" % (args, want))
    check(args[:2] == ["--mode", "nccl2"] or "nccl2" in args, "the trainer's args %s lack --mode nccl2" % args)
    name = trainers["metadata"]["name"]
    expect = ["%s-%d.%s:%d" % (name, i, svc["metadata"]["name"], port[0]) for i in range(high)] if port else []
    for i in range(high):
        env = vm.pod_env(tc, "%s-%d" % (name, i), {"apps.kubernetes.io/pod-index": str(i)})
        got = vm.dry_run(oar, env, args)
        if got:
            where = "elastic nccl2 trainer pod %d" % i
            check(got["role"] == "TRAINER" and got["trainer_id"] == str(i), "%s resolves %s" % (where, got))
            check(got["trainer_endpoints"] == ",".join(expect), "%s sees trainers %s" % (where, got["trainer_endpoints"]))
            check(got["current_endpoint"] == expect[i], "%s resolves its endpoint %s" % (where, got["current_endpoint"]))


def refusals(oar, tmp):
    for args, says in ((["--format", "kubeflow", "--trainers", "2", "--image", "x"], "runs nccl2 mode"),
                       (["--format", "paddle-operator", "--mode", "nccl2", "--trainers", "2", "--image", "x"], "runs pserver mode"),
                       (["--trainers", "2"], "--image is required"),
                       (["--format", "helm", "--image", "x"], "--format 'helm'"),
                       (["--name", "Bad_Name", "--image", "x"], "not a DNS label"),
                       (["--port", "70000", "--image", "x"], "--port 70000 is not a TCP port"),
                       (["--port", "-1", "--image", "x"], "--port -1 is not a TCP port"),
                       (["--image", "a b"], "--image 'a b' holds a space"),
                       (["--model", "nosuch", "--image", "x"], "unknown model 'nosuch'"),
                       (["--model", "ctr_dnn", "--image", "x"], "trains from MultiSlot files"),
                       (["--epochs", "0", "--image", "x"], "--epochs must be at least 1"),
                       (["--trainers", "2:4", "--image", "x"], "MIN:MAX is for elastic jobs"),
                       (["--elastic", "--format", "paddle-operator", "--image", "x"],
                        "--elastic writes plain manifests"),
                       (["--runtime_split_send_recv", "--half_async", "--image", "x"],
                        "--half_async is a mode of async training: add --async"),
                       (["--mode", "nccl2", "--runtime_split_send_recv", "--image", "x"], "--mode nccl2 has none"),
                       (["--async", "--geo_sgd_need_push_nums", "5", "--image", "x"], "goes with --geo_sgd_mode")):
        r = subprocess.run([oar, "deploy", "--out", os.path.join(tmp, "refused")] + args, capture_output=True, text=True)
        check(r.returncode != 0 and says in r.stderr, "oar deploy %s: expected an error saying %r, got %r"
              % (" ".join(args), says, r.stderr.strip()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oar", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for p, t in ((2, 2), (3, 1), (1, 4)):
            plain(a.oar, a.source, tmp, p, t)
            paddle_operator(a.oar, tmp, p, t)
        committed_are_generated(a.oar, a.source, tmp)
        for t in (1, 3):
            kubeflow(a.oar, tmp, t)
        elastic(a.oar, tmp, 2, 2, 4, async_=True)
        elastic(a.oar, tmp, 1, 1, 1, async_=False)
        elastic(a.oar, tmp, 2, 2, 4, async_=True, modes=("--runtime_split_send_recv", "--half_async"))
        elastic(a.oar, tmp, 2, 1, 3, async_=True, modes=("--geo_sgd_mode", "--geo_sgd_need_push_nums", "20"))
        elastic_nccl2(a.oar, tmp, 2, 4)
        refusals(a.oar, tmp)
    return vm.report()


if __name__ == "__main__":
    sys.exit(main())
