#!/usr/bin/env python3
"""Rewrites examples/jobs/*.yaml for the real-node suite (deploy/e2e/run.sh).

Every container's image becomes the test image (localhost/volcano-rs-jobcheck:latest,
imagePullPolicy Never) and its command the expectations of cli/examples/jobcheck.rs that
the job's plugins promise; CPU and memory requests shrink to fit one small node (the GPU
requests stay: the node advertises nvidia.com/gpu). The launch-order init containers are
turned off: they resolve peer pods by DNS name (busybox's nc), and the test node has no
cluster DNS.

    jobs.py EXAMPLES_DIR OUT_DIR   writes OUT_DIR/<name>.yaml per example, prints the names

An example the script has no expectations for is an error: a new example needs its own.
The expectations are written from docs/jobs.md and the plugins' documentation, not read
from the controller's code.
"""

import json
import os
import sys

import yaml

IMAGE = "localhost/volcano-rs-jobcheck:latest"


def hosts(job, task, replicas, port=None):
    suffix = f":{port}" if port else ""
    return [f"{job}-{task}-{i}.{job}{suffix}" for i in range(replicas)]


def svc(job, tasks):
    """The svc plugin: the pod's host name and subdomain, /etc/volcano's host lists."""
    checks = []
    for task, n in tasks.items():
        key = task.upper().replace("-", "_")
        checks.append(f"file:/etc/volcano/VC_{key}_HOSTS={','.join(hosts(job, task, n))}")
        checks.append(f"file:/etc/volcano/VC_{key}_NUM={n}")
    return checks


def env_plugin():
    return ["env:VK_TASK_INDEX={i}", "env:VC_TASK_INDEX={i}"]


def ssh():
    """The ssh plugin (added by the webhook for mpi): the job's key pair in /root/.ssh."""
    return [
        "nonempty:/root/.ssh/id_rsa",
        "nonempty:/root/.ssh/id_rsa.pub",
        "contains:/root/.ssh/authorized_keys=/root/.ssh/id_rsa.pub",
    ]


def expectations(job, task):
    """The jobcheck arguments of `task`'s containers in the example job `job`."""
    if job == "tf-dist-mnist":
        tasks = {"ps": 1, "worker": 2}
        cluster = {"ps": hosts(job, "ps", 1, 2222), "worker": hosts(job, "worker", 2, 2222)}
        tf = {"cluster": cluster, "task": {"type": task, "index": "{i}"}}
        tf_json = json.dumps(tf).replace('"{i}"', "{i}")
        # The workers finish last (TaskCompleted ends the job), so every pod exits by itself.
        extra = ["sleep=5"] if task == "worker" else []
        return [f"hostname={job}-{task}-{{i}}", f"json-env:TF_CONFIG={tf_json}"] + env_plugin() + svc(job, tasks) + extra
    if job == "pytorch-ddp":
        tasks = {"master": 1, "worker": 2}
        rank = "0" if task == "master" else "{i+1}"
        master = f"{job}-master-0.{job}"
        return [
            f"hostname={job}-{task}-{{i}}",
            f"env:MASTER_ADDR={master}",
            "env:MASTER_PORT=23456",
            "env:WORLD_SIZE=3",
            f"env:RANK={rank}",
            f"env:PET_MASTER_ADDR={master}",
            "env:PET_MASTER_PORT=23456",
            "env:PET_NNODES=3",
            f"env:PET_NODE_RANK={rank}",
            "env:PET_NPROC_PER_NODE=2",
        ] + svc(job, tasks)
    if job == "horovod":
        tasks = {"mpimaster": 1, "mpiworker": 2}
        checks = [f"hostname={job}-{task}-{{i}}"] + ssh() + svc(job, tasks)
        if task == "mpimaster":
            workers = hosts(job, "mpiworker", 2)
            hostfile = "".join(f"{h} slots=2\\n" for h in workers)
            checks += [
                f"env:MPI_HOST={','.join(workers)}",
                f"file:/etc/mpi/hostfile={hostfile}",
                "env:OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile",
            ]
            # The master finishes last (TaskCompleted ends the job), so every pod exits by
            # itself and is seen to exit 0.
            checks += ["sleep=5"]
        return checks
    if job == "mxnet-ps":
        role = {"scheduler": "scheduler", "server": "server", "worker": "worker"}[task]
        tasks = {"scheduler": 1, "server": 1, "worker": 2}
        return [
            f"hostname={job}-{task}-{{i}}",
            f"env:DMLC_PS_ROOT_URI={job}-scheduler-0.{job}",
            "env:DMLC_PS_ROOT_PORT=9091",
            "env:DMLC_NUM_SERVER=1",
            "env:DMLC_NUM_WORKER=2",
            f"env:DMLC_ROLE={role}",
        ] + svc(job, tasks)
    if job == "ps-then-workers":
        tasks = {"ps": 1, "worker": 2}
        extra = ["sleep=10"] if task == "ps" else []
        return [f"hostname={job}-{task}-{{i}}"] + env_plugin() + svc(job, tasks) + extra
    raise SystemExit(f"jobs.py: no expectations for the example job {job!r}; add them")


def shrink(resources):
    for kind in ("requests", "limits"):
        r = resources.get(kind) or {}
        for name in ("cpu", "memory"):
            if name in r:
                r[name] = "10m" if name == "cpu" else "32Mi"


def rewrite(doc):
    job = doc["metadata"]["name"]
    plugins = doc["spec"].get("plugins") or {}
    if "pytorch" in plugins:
        plugins["pytorch"] = [a for a in plugins["pytorch"] if not a.startswith("--wait-master-enabled")]
    if "mpi" in plugins:
        plugins["mpi"] = plugins["mpi"] + ["--wait-workers-enabled=false"]
    for task in doc["spec"]["tasks"]:
        spec = task["template"]["spec"]
        for c in spec["containers"]:
            c["image"] = IMAGE
            c["imagePullPolicy"] = "Never"
            c.pop("command", None)
            c["args"] = expectations(job, task["name"])
            shrink(c.get("resources") or {})
    return job


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: jobs.py EXAMPLES_DIR OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.endswith(".yaml"):
            continue
        docs = [d for d in yaml.safe_load_all(open(os.path.join(src, name))) if d]
        if len(docs) != 1 or docs[0].get("kind") != "Job":
            raise SystemExit(f"jobs.py: {name}: expected one batch.volcano.sh Job")
        job = rewrite(docs[0])
        with open(os.path.join(out, f"{job}.yaml"), "w") as f:
            yaml.safe_dump(docs[0], f, sort_keys=False)
        print(job)


if __name__ == "__main__":
    main()
