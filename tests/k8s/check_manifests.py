#!/usr/bin/python3
"""Offline checks of deploy/k8s/ (no cluster here, and no kubectl or schema in
Debian): every document parses as YAML and has the structure its recipe
promises, and every flag the containers pass exists in the real binary's
`corepool <command> --help`. Run by ctest as k8s.ManifestsAreWellFormed.
Usage: check_manifests.py DEPLOY_K8S_DIR COREPOOL_BIN"""
import pathlib
import subprocess
import sys

import yaml

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def container(doc):
    spec = doc["spec"]["template"]["spec"]
    check(len(spec["containers"]) == 1, f"{doc['metadata']['name']}: expected one container")
    return spec["containers"][0]


def whole_cores(name, c):
    res = c.get("resources", {})
    check(res.get("requests") == res.get("limits"), f"{name}: resources.requests must equal limits")
    cpu = str(res.get("limits", {}).get("cpu", ""))
    check(cpu.isdigit() and int(cpu) >= 1, f"{name}: cpu limit must be whole cores, got '{cpu}'")


def flags_exist(name, args, corepool):
    command = args[0]
    helptext = subprocess.run([corepool, command, "--help"], capture_output=True, text=True, timeout=60).stdout
    for arg in args[1:]:
        if arg.startswith("--"):
            check(arg in helptext, f"{name}: `corepool {command}` has no flag {arg}")


def check_job(doc, corepool):
    name = "Job " + doc["metadata"]["name"]
    spec = doc["spec"]
    check(spec.get("completionMode") == "Indexed", f"{name}: completionMode must be Indexed")
    c = container(doc)
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    check(env.get("COREPOOL_SHARD_COUNT") == str(spec.get("completions")),
          f"{name}: COREPOOL_SHARD_COUNT {env.get('COREPOOL_SHARD_COUNT')} != completions {spec.get('completions')}")
    check(c["args"][0] == "batch" and "--manifest" in c["args"] and "--out" in c["args"],
          f"{name}: args must run `batch --manifest ... --out ...`")
    check("--shard" not in c["args"], f"{name}: the shard comes from JOB_COMPLETION_INDEX, not --shard")
    check(doc["spec"]["template"]["spec"].get("restartPolicy") in ("Never", "OnFailure"), f"{name}: restartPolicy")
    mounts = {m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"] for v in doc["spec"]["template"]["spec"].get("volumes", [])}
    check(mounts <= volumes, f"{name}: volumeMounts {mounts} not all in volumes {volumes}")
    whole_cores(name, c)
    flags_exist(name, c["args"], corepool)


def check_deployment(doc, corepool):
    name = "Deployment " + doc["metadata"]["name"]
    labels = doc["spec"]["template"]["metadata"]["labels"]
    selector = doc["spec"]["selector"]["matchLabels"]
    check(selector.items() <= labels.items(), f"{name}: selector {selector} does not match pod labels {labels}")
    c = container(doc)
    ports = {p.get("name") for p in c.get("ports", [])}
    for probe, path in (("readinessProbe", "/v2/health/ready"), ("livenessProbe", "/v2/health/live")):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path, f"{name}: {probe} must GET {path}, not {get.get('path')}")
        check(get.get("port") in ports, f"{name}: {probe} port {get.get('port')} is not a container port {ports}")
    check(c["args"][0] == "serve", f"{name}: args must run `serve`")
    check("--workers" not in c["args"], f"{name}: leave --workers at 0 so workers follow the CPU quota")
    whole_cores(name, c)
    flags_exist(name, c["args"], corepool)
    return labels, ports


def check_service(doc, deployments):
    name = "Service " + doc["metadata"]["name"]
    selector = doc["spec"]["selector"]
    targets = [(labels, ports) for labels, ports in deployments if selector.items() <= labels.items()]
    check(len(targets) == 1, f"{name}: selector {selector} must pick exactly one Deployment's pods")
    for p in doc["spec"]["ports"]:
        check(all(p["targetPort"] in ports for _, ports in targets), f"{name}: targetPort {p['targetPort']} unknown")


def main():
    root, corepool = pathlib.Path(sys.argv[1]), sys.argv[2]
    docs = []
    for f in sorted(root.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            check(all(k in doc for k in ("apiVersion", "kind", "metadata")), f"{f}: apiVersion/kind/metadata")
            docs.append(doc)
    kinds = sorted(d["kind"] for d in docs)
    check(kinds == ["Deployment", "Job", "Service"], f"expected a Job, a Deployment and a Service, got {kinds}")
    deployments = [check_deployment(d, corepool) for d in docs if d["kind"] == "Deployment"]
    for d in docs:
        if d["kind"] == "Job":
            check_job(d, corepool)
        if d["kind"] == "Service":
            check_service(d, deployments)
    for p in problems:
        print("k8s: " + p, file=sys.stderr)
    print(f"k8s: {len(docs)} documents checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
