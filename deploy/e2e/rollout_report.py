#!/usr/bin/env python3
"""Judges the real-node suite's rolling update of the scheduler (run.sh).

    rollout_report.py LOAD_PODS_JSON EVENTS_JSON SCRAPE_JSON

Prints one line of what it measured and exits 1 when a pod was bound twice (more than one
Scheduled event, or a bind failure counted by a replica), when two replicas led at once,
when no replica led for longer than the Lease (15 s), when binds stopped for longer than
that while pods waited, or when a load pod is not bound.
"""

import json
import sys
from datetime import datetime

LEASE_SECONDS = 15


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def main():
    pods = json.load(open(sys.argv[1]))["items"]
    events = json.load(open(sys.argv[2]))["items"]
    scrape = json.load(open(sys.argv[3]))
    scheduled = {}
    for e in events:
        name = e["regarding"]["name"]
        if e.get("reason") == "Scheduled" and name.startswith("load-"):
            scheduled[name] = scheduled.get(name, 0) + (e.get("series") or {}).get("count", 1)
    twice = sorted(p for p, n in scheduled.items() if n > 1)
    bound_at = {}
    for p in pods:
        for c in p["status"].get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "True":
                bound_at[p["metadata"]["name"]] = ts(c["lastTransitionTime"])
    created = {p["metadata"]["name"]: ts(p["metadata"]["creationTimestamp"]) for p in pods}
    bound = sorted(bound_at.values())
    gaps = [b - a for a, b in zip(bound, bound[1:])] or [0]
    waits = [bound_at[n] - created[n] for n in bound_at] or [0]
    binds = sum(v["binds"] - v["first_binds"] for v in scrape["pods"].values())
    failures = sum(v["bind_failures"] - v["first_bind_failures"] for v in scrape["pods"].values())
    no_leader, start, both = 0.0, None, 0
    for t, leaders in scrape["leader_samples"]:
        if not leaders and start is None:
            start = t
        if leaders and start is not None:
            no_leader, start = max(no_leader, t - start), None
        both += len(leaders) > 1
    print(
        f"run.sh: rolling update under load: {len(bound_at)}/{len(pods)} pods bound; binds counted by the "
        f"replicas {binds:.0f}, bind failures {failures:.0f}; pods with more than one Scheduled event: "
        f"{twice or 'none'} ({len(scheduled)} with an event); longest time without a leader {no_leader:.1f} s, "
        f"samples with two leaders {both}; longest gap between binds {max(gaps):.0f} s, longest wait of a "
        f"pod {max(waits):.0f} s (API timestamps have one-second resolution); replicas seen "
        f"{sorted(scrape['pods'])}"
    )
    ok = (
        not twice
        and failures == 0
        and both == 0
        and no_leader <= LEASE_SECONDS
        and max(gaps) <= LEASE_SECONDS
        and len(bound_at) == len(pods)
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
