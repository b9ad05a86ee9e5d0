#!/usr/bin/env python3
"""Watches the scheduler replicas during the real-node suite's rolling update (run.sh).

    scrape.py KUBECONFIG OUT_JSON STOP_FILE

Twice a second, until STOP_FILE exists: lists the scheduler pods, reads each one's /metrics
at its pod address (on the test node's bridge) and keeps, per pod, the first and the last
volcano_rs_binds_total and volcano_rs_bind_failures_total it served, and which replicas said
volcano_rs_leader 1 at each sample. Writes OUT_JSON at the end: {"pods": {name: {"first_binds",
"binds", "first_bind_failures", "bind_failures"}}, "leader_samples": [[t, [names]]]}.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request


def metric(text, name):
    total = 0.0
    found = False
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


def main():
    kubeconfig, out, stop = sys.argv[1:4]
    pods = {}
    samples = []
    while not os.path.exists(stop):
        t = time.time()
        listed = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "-n", "volcano-system", "get", "pods",
             "-l", "app.kubernetes.io/name=volcano-rs-scheduler", "-o", "json"],
            capture_output=True, text=True)
        leaders = []
        if listed.returncode == 0:
            for p in json.loads(listed.stdout)["items"]:
                ip = p["status"].get("podIP")
                name = p["metadata"]["name"]
                if not ip:
                    continue
                try:
                    text = urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=1).read().decode()
                except OSError:
                    continue
                binds = metric(text, "volcano_rs_binds_total")
                failures = metric(text, "volcano_rs_bind_failures_total")
                seen = pods.setdefault(name, {"first_binds": binds or 0, "first_bind_failures": failures or 0})
                seen["binds"] = binds or 0
                seen["bind_failures"] = failures or 0
                if metric(text, "volcano_rs_leader") == 1:
                    leaders.append(name)
        samples.append([t, leaders])
        time.sleep(max(0.0, 0.5 - (time.time() - t)))
    with open(out, "w") as f:
        json.dump({"pods": pods, "leader_samples": samples}, f)


if __name__ == "__main__":
    main()
