#!/usr/bin/env python3
"""Validates every Kubernetes core resource `oar deploy` generates against
the API's own schemas, offline, with kubernetes-validate (pinned by
scripts/install-python-tools.sh) for one pinned Kubernetes version, in
strict mode (an unknown field is an error, so a misspelt key fails).

- plain, pserver and nccl2 mode at several sizes: the Service and Job
  documents as they are;
- paddle-operator and kubeflow: their PaddleJob is a custom resource with
  no schema in the API, so each replica's pod template is validated as the
  core `PodTemplate` it becomes (that is what the operators stamp pods from);
- the committed deploy/k8s manifests;
- and, so the check itself is known to bite, documents spoiled the ways a
  hand edit would (an env value that is a number, a misspelt field, a
  pod count that is a string) must be refused.

Run with the tools' interpreter:
  /opt/oar-py-tools/bin/python3 validate_schemas.py --oar build/cli/oar --source .
"""
import argparse
import copy
import os
import subprocess
import sys
import tempfile

import yaml

try:
    import kubernetes_validate
except ImportError:
    sys.exit("kubernetes_validate is not importable: run scripts/install-python-tools.sh and use its python3")

KUBERNETES = "1.31.0"  # the pinned API version every manifest must satisfy
problems = []
validated = []


def check(cond, msg):
    if not cond:
        problems.append(msg)
    return cond


def validate(doc, where):
    """None if the document satisfies the schema, else the error's text."""
    try:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        return None
    except kubernetes_validate.ValidationError as e:
        return "%s at %s" % (e.message, "/".join(str(p) for p in e.absolute_path))
    except kubernetes_validate.SchemaNotFoundError as e:
        return e.message


def must_pass(doc, where):
    err = validate(doc, where)
    if check(err is None, "%s: %s" % (where, err)):
        validated.append(where)


def pod_template(name, template):
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": template}


def docs_in(directory):
    for root, _, files in os.walk(directory):
        for f in sorted(files):
            if f.endswith(".yaml"):
                with open(os.path.join(root, f)) as fh:
                    for doc in yaml.safe_load_all(fh):
                        if doc is not None:
                            yield os.path.relpath(os.path.join(root, f), directory), doc


def check_dir(directory, label):
    for name, doc in docs_in(directory):
        where = "%s %s (%s)" % (label, name, doc.get("kind"))
        if doc.get("kind") == "PaddleJob" and doc["apiVersion"] == "batch.paddlepaddle.org/v1":
            for role in ("ps", "worker"):
                if role in doc["spec"]:
                    must_pass(pod_template("%s-%s" % (doc["metadata"]["name"], role), doc["spec"][role]["template"]),
                              "%s %s template" % (where, role))
        elif doc.get("kind") == "PaddleJob" and doc["apiVersion"] == "kubeflow.org/v1":
            for role, spec in doc["spec"]["paddleReplicaSpecs"].items():
                must_pass(pod_template("%s-%s" % (doc["metadata"]["name"], role.lower()), spec["template"]),
                          "%s %s template" % (where, role))
        else:
            must_pass(doc, where)


def deploy(oar, out, *args):
    r = subprocess.run([oar, "deploy", "--out", out] + list(args), capture_output=True, text=True)
    return check(r.returncode == 0, "oar deploy %s: %s" % (" ".join(args), r.stderr.strip()))


def spoiled_are_refused(oar, tmp):
    out = os.path.join(tmp, "spoil")
    if not deploy(oar, out, "--pservers", "2", "--trainers", "2", "--image", "oar:1"):
        return
    docs = {doc["kind"]: doc for _, doc in docs_in(out)}
    docs.update({"%s/%s" % (doc["kind"], doc["metadata"]["labels"]["role"]): doc for _, doc in docs_in(out)})
    bad = []
    job = copy.deepcopy(docs["Job/trainer"])
    job["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = 2
    bad.append(("an env value that is a number", job))
    ps = copy.deepcopy(docs["Job/pserver"])
    ps["spec"]["completion"] = ps["spec"].pop("completions")
    bad.append(("a misspelt field (completion)", ps))
    ps = copy.deepcopy(docs["Job/pserver"])
    ps["spec"]["parallelism"] = "2"
    bad.append(("parallelism as a string", ps))
    svc = copy.deepcopy(docs["Service"])
    svc["spec"]["ports"][0]["port"] = "rpc"
    bad.append(("a port that is a name", svc))
    for what, doc in bad:
        check(validate(doc, what) is not None, "the schema check accepted %s: it cannot be trusted" % what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oar", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for p, t in ((2, 2), (3, 1), (1, 4)):
            d = os.path.join(tmp, "plain_%d_%d" % (p, t))
            if deploy(a.oar, d, "--pservers", str(p), "--trainers", str(t), "--image", "oar:1"):
                check_dir(d, "plain %dx%d" % (p, t))
            d = os.path.join(tmp, "nccl2_%d" % t)
            if deploy(a.oar, d, "--mode", "nccl2", "--trainers", str(t), "--image", "oar:1"):
                check_dir(d, "plain nccl2 %d" % t)
            d = os.path.join(tmp, "paddleflow_%d_%d" % (p, t))
            if deploy(a.oar, d, "--format", "paddle-operator", "--pservers", str(p), "--trainers", str(t),
                      "--image", "oar:1"):
                check_dir(d, "paddle-operator %dx%d" % (p, t))
            d = os.path.join(tmp, "kubeflow_%d" % t)
            if deploy(a.oar, d, "--format", "kubeflow", "--mode", "nccl2", "--trainers", str(t), "--image", "oar:1"):
                check_dir(d, "kubeflow %d" % t)
            d = os.path.join(tmp, "elastic_%d_%d" % (p, t))
            if deploy(a.oar, d, "--elastic", "--pservers", str(p), "--trainers", "1:%d" % t, "--image", "oar:1"):
                check_dir(d, "elastic %dx1:%d" % (p, t))
        check_dir(os.path.join(a.source, "deploy", "k8s"), "committed")
        spoiled_are_refused(a.oar, tmp)
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    print("validated %d documents against Kubernetes %s (strict, kubernetes-validate %s); %d problems"
          % (len(validated), KUBERNETES, kubernetes_validate.__version__, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
