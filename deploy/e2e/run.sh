#!/bin/bash
# The real-node suite (docs/testing.md): a single-node cluster from local binaries
# (deploy/e2e/node.sh), the image built here, deploy/ installed as a user installs it, the
# example jobs run by real containers, a rolling update of the scheduler under load, and
# the uninstall. Prints what it measured; exits non-zero at the first failure, with the
# objects and logs that show why.
#
#   deploy/e2e/run.sh [STATE_DIR]
#
# Needs what node.sh needs (VOLCANO_RS_NODE_ASSETS, root, containerd, podman…) and the
# images of `deploy/image/build.sh --test-images` (run.sh does not rebuild them; the
# cargo test cli/tests/real_node.rs does). KEEP_NODE=1 leaves the cluster running at the
# end (stop it with `deploy/e2e/node.sh down STATE_DIR`).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${1:-$(mktemp -d /tmp/volcano-rs-node.XXXXXX)}
mkdir -p "$state"
state=$(cd "$state" && pwd)
summary=$state/summary.txt
: >"$summary"
NS=volcano-system
TEST_IMAGE=localhost/volcano-rs-jobcheck:latest

say() { echo "run.sh: $*" | tee -a "$summary" >&2; }
fail() {
    say "FAILED: $*"
    {
        echo "--- pods"; k get pods -A -o wide
        echo "--- events"; k get events -A --sort-by=.lastTimestamp | tail -40
        for p in $(k -n "$NS" get pods -o name 2>/dev/null); do echo "--- logs $p"; k -n "$NS" logs "$p" --tail=30; done
    } >&2 2>&1 || true
    exit 1
}
k() { kubectl --kubeconfig "$state/kubeconfig" "$@"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

cleanup() {
    local rc=$?
    if [ "${KEEP_NODE:-0}" = 1 ]; then
        say "the cluster keeps running: KUBECONFIG=$state/kubeconfig; stop it with deploy/e2e/node.sh down $state"
    else
        "$here/node.sh" down "$state" || true
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for i in localhost/volcano-rs:latest "$TEST_IMAGE" localhost/volcano-rs-pause:latest; do
    podman image exists "$i" || { echo "run.sh: no image $i: run deploy/image/build.sh --test-images" >&2; exit 1; }
done
say "image $(podman image inspect localhost/volcano-rs:latest --format '{{.Size}}') bytes; $(podman run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --runtime runc localhost/volcano-rs:latest --version)"

t=$(now)
"$here/node.sh" up "$state" >/dev/null
say "node Ready in $(secs "$t" "$(now)") s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet)"

# GPUs for the examples' requests: extended resources advertised on the node's status
# (no device plugin; the kubelet admits such pods against the advertised capacity).
k patch node vrs-node --subresource=status --type=json \
    -p '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"16"}]' >/dev/null
for _ in $(seq 1 60); do
    [ "$(k get node vrs-node -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 16 ] && break
    sleep 0.5
done
[ "$(k get node vrs-node -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 16 ] \
    || fail "the node does not advertise nvidia.com/gpu"

# --- The install, as a user does it, and the first bind.
first_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: first-bind, namespace: default}
spec:
  schedulerName: volcano-rs
  restartPolicy: Never
  containers:
    - {name: c, image: $TEST_IMAGE, imagePullPolicy: Never, args: ["sleep=1", "env:KUBERNETES_SERVICE_HOST=10.245.0.1"],
       resources: {requests: {cpu: 10m, memory: 16Mi}}}
EOF
}
t_apply=$(now)
k apply -k "$root/deploy/" >"$state/apply.log" || fail "kubectl apply -k deploy/ ($(cat "$state/apply.log"))"
first_pod | k apply -f - >/dev/null
until [ -n "$(k get pod first-bind -o jsonpath='{.spec.nodeName}')" ]; do
    [ "$(secs "$t_apply" "$(now)" | cut -d. -f1)" -lt 180 ] || fail "no bind within 180 s of kubectl apply"
    sleep 0.2
done
say "kubectl apply -k deploy/ to the first bind by volcano-rs: $(secs "$t_apply" "$(now)") s"

for d in volcano-rs-scheduler volcano-rs-controller volcano-rs-webhook; do
    k -n "$NS" rollout status "deployment/$d" --timeout=180s >/dev/null || fail "deployment $d is not available"
done
say "every Deployment available (probes pass): $(k -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.name}{" "}{end}')"
k wait --for=jsonpath='{.status.phase}'=Succeeded pod/first-bind --timeout=120s >/dev/null \
    || fail "the first pod did not run to Succeeded"
# The control: the test image fails a pod whose expectation is wrong.
first_pod | sed 's/name: first-bind/name: wrong-expectation/; s/KUBERNETES_SERVICE_HOST=10.245.0.1/KUBERNETES_SERVICE_HOST=192.0.2.99/' \
    | k apply -f - >/dev/null
k wait --for=jsonpath='{.status.phase}'=Failed pod/wrong-expectation --timeout=120s >/dev/null \
    || fail "the test image did not fail a pod with a wrong expectation"
say "the test image passes a pod that holds its expectations and fails one that does not"

# Metrics from every pod, at its own address (the bridge); one scheduler leads.
leaders=0
for p in $(k -n "$NS" get pods -l app.kubernetes.io/name=volcano-rs-scheduler -o name); do
    ip=$(k -n "$NS" get "$p" -o jsonpath='{.status.podIP}')
    m=$(curl -sf "http://$ip:8080/metrics") || fail "$p serves no /metrics"
    grep -q '^volcano_rs_leader 1' <<<"$m" && leaders=$((leaders + 1))
done
[ "$leaders" = 1 ] || fail "$leaders scheduler replicas say they lead (volcano_rs_leader), expected 1"
holder=$(k -n "$NS" get lease volcano-rs -o jsonpath='{.spec.holderIdentity}')
say "one scheduler leads (volcano_rs_leader 1 on one replica; Lease holder $holder)"
for p in $(k -n "$NS" get pods -l app.kubernetes.io/name=volcano-rs-controller -o name); do
    ip=$(k -n "$NS" get "$p" -o jsonpath='{.status.podIP}')
    m=$(curl -sf "http://$ip:8081/metrics") || fail "$p serves no /metrics on 8081"
    grep -q '^# TYPE' <<<"$m" || fail "$p serves no metric on 8081"
done
say "the controller serves /metrics on 8081"

# The webhook from inside the cluster: its certificate, its registration, its answers.
for c in $(k get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep volcano-admission-service); do
    [ -n "$(k get "$c" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ] || fail "$c has no caBundle"
done
bad=$(k create -f - 2>&1 <<'EOF' || true
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: bad-job, namespace: default}
spec:
  minAvailable: 5
  schedulerName: volcano-rs
  tasks:
    - name: t
      replicas: 1
      template: {spec: {containers: [{name: c, image: x}]}}
EOF
)
grep -q 'denied the request' <<<"$bad" || fail "the webhook did not refuse an invalid Job: $bad"
say "the webhook refuses an invalid Job: $(grep -o 'denied the request.*' <<<"$bad" | head -c 160)"
# Applying deploy/ again (an upgrade) keeps what the webhook registered: kubectl does not
# own the configurations' webhooks.
k apply -k "$root/deploy/" >/dev/null || fail "kubectl apply -k deploy/ a second time"
for c in $(k get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep volcano-admission-service); do
    [ -n "$(k get "$c" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ] || fail "$c lost its webhook on re-apply"
done
say "kubectl apply -k deploy/ again keeps the webhook's registration"

# --- The example jobs, with the test image.
python3 "$here/jobs.py" "$root/examples/jobs" "$state/jobs" >"$state/jobs.list"
for j in $(cat "$state/jobs.list"); do
    k apply -f "$state/jobs/$j.yaml" >/dev/null || fail "creating the job $j"
done
t_jobs=$(now)
for j in $(cat "$state/jobs.list"); do
    until [ "$(k get jobs.batch.volcano.sh "$j" -o jsonpath='{.status.state.phase}')" = Completed ]; do
        phase=$(k get jobs.batch.volcano.sh "$j" -o jsonpath='{.status.state.phase}')
        case "$phase" in Failed|Aborted|Terminated)
            for p in $(k get pods -l "volcano.sh/job-name=$j" -o name); do echo "--- $p"; k logs "$p" --all-containers; done >&2
            fail "job $j is $phase" ;;
        esac
        [ "$(secs "$t_jobs" "$(now)" | cut -d. -f1)" -lt 300 ] || fail "job $j is $phase, not Completed, after 300 s"
        sleep 1
    done
    # Every pod of the job ran its checks and exited 0 (none was killed by a policy).
    n=$(k get pods -l "volcano.sh/job-name=$j" -o json | python3 -c '
import json, sys
pods = json.load(sys.stdin)["items"]
want = sum(t["replicas"] for t in json.load(open(sys.argv[1]))["spec"]["tasks"])
ran = [p for p in pods if any(s.get("state", {}).get("terminated", {}).get("exitCode") == 0
                              for s in p["status"].get("containerStatuses", []))]
print(f"{len(ran)}/{want}")
sys.exit(0 if len(ran) == want else 1)' <(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' "$state/jobs/$j.yaml")) \
        || fail "job $j: only $n of its pods ran their checks to exit 0"
    say "job $j Completed ($n pods whose container exited 0 after its checks)"
done

# --- A rolling update of the scheduler while pods arrive.
load_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: load-$1, namespace: default, labels: {e2e: load}}
spec:
  schedulerName: volcano-rs
  restartPolicy: Never
  containers:
    - {name: c, image: $TEST_IMAGE, imagePullPolicy: Never, args: ["sleep=0"],
       resources: {requests: {cpu: 1m, memory: 8Mi}}}
EOF
}
transitions_before=$(k -n "$NS" get lease volcano-rs -o jsonpath='{.spec.leaseTransitions}')
rm -f "$state/scrape.stop"
python3 "$here/scrape.py" "$state/kubeconfig" "$state/scrape.json" "$state/scrape.stop" &
scraper=$!
sleep 2
( for i in $(seq 1 40); do load_pod "$i" | k apply -f - >/dev/null; sleep 1; done ) &
loader=$!
sleep 5
k -n "$NS" rollout restart deployment/volcano-rs-scheduler >/dev/null
k -n "$NS" rollout status deployment/volcano-rs-scheduler --timeout=180s >/dev/null || fail "the rolling update did not finish"
wait "$loader"
deadline=$(( $(date +%s) + 120 ))
until [ "$(k get pods -l e2e=load -o jsonpath='{range .items[?(@.spec.nodeName)]}x{end}' | wc -c)" = 40 ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "not every load pod was bound after the rolling update"
    sleep 1
done
sleep 2
touch "$state/scrape.stop"
wait "$scraper"
k get pods -l e2e=load -o json >"$state/load-pods.json"
k get events.events.k8s.io -o json >"$state/events.json"
python3 "$here/rollout_report.py" "$state/load-pods.json" "$state/events.json" "$state/scrape.json" \
    | tee -a "$summary" >&2 || fail "the rolling update"
transitions_after=$(k -n "$NS" get lease volcano-rs -o jsonpath='{.spec.leaseTransitions}')
say "Lease transitions during the update: $(( ${transitions_after:-0} - ${transitions_before:-0} ))"

# --- The uninstall: nothing of volcano-rs may be left.
k delete pods -l e2e=load --wait=false >/dev/null
k delete -k "$root/deploy/" --wait=true --timeout=180s >"$state/delete.log" 2>&1 || fail "kubectl delete -k deploy/: $(cat "$state/delete.log")"
left=$( {
    k get namespace "$NS" -o name 2>/dev/null || true
    k get crd -o name | grep volcano.sh || true
    k get clusterroles,clusterrolebindings -o name | grep volcano-rs || true
    k get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep volcano || true
    k get priorityclasses -o name | grep volcano || true
} )
[ -z "$left" ] || fail "left behind by kubectl delete -k deploy/: $(echo $left)"
say "kubectl delete -k deploy/ leaves nothing of volcano-rs"
say "PASSED"
