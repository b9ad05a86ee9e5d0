#!/bin/bash
# A real single-node Kubernetes cluster for the real-node suite (docs/testing.md), started
# from local binaries, with nothing pulled and no traffic leaving the machine.
#
#   deploy/e2e/node.sh up STATE_DIR     start it; prints the kubeconfig path
#   deploy/e2e/node.sh down STATE_DIR   stop everything `up` started and undo its network setup
#
# Binaries: VOLCANO_RS_NODE_ASSETS (else KUBEBUILDER_ASSETS) names a folder holding etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kubelet (built as
# ../shared/K8S-TESTING.md says; never committed). containerd, runc, the CNI plugins
# (/usr/lib/cni), iptables, ip, openssl and ctr come from Debian. The pause image
# localhost/volcano-rs-pause:latest must be in podman (deploy/image/build.sh --test-images).
# Root is needed (containerd, the kubelet, the pod network).
#
# The network, all on this machine:
# - the bridge vrs0 (10.244.0.1/24), made here; pods get 10.244.0.0/24 from host-local,
#   without ipMasq;
# - the node's address is the bridge's, 10.244.0.1 (the kubelet refuses a loopback node IP);
#   the API server listens there, so pods reach it directly;
# - Services get ClusterIPs from 10.245.0.0/24, and nothing serves them but one rule: the
#   `kubernetes` Service (10.245.0.1:443, what KUBERNETES_SERVICE_HOST/PORT say in every
#   pod) is DNATed to the API server at 10.244.0.1; every other ClusterIP is a blackhole
#   route. The API server calls webhooks at their pods' addresses
#   (--enable-aggregator-routing), not at ClusterIPs;
# - packets from the bridge are never forwarded elsewhere (FORWARD drop), so a pod reaches
#   only other pods and the node's bridge address;
# - no cluster DNS: pods get a resolv.conf naming 127.0.0.1 (their own loopback);
# - containerd pulls through a proxy on a closed loopback port: a missing image fails to
#   pull instead of reaching a registry.
set -euo pipefail

BRIDGE=vrs0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.245.0.0/24
KUBERNETES_SVC_IP=10.245.0.1
NODE_NAME=vrs-node
TAG=volcano-rs-e2e
PAUSE_IMAGE=localhost/volcano-rs-pause:latest

die() { echo "node.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: node.sh up|down STATE_DIR"
cmd=$1
mkdir -p "$2"
state=$(cd "$2" && pwd)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The iptables rules, added by `up` and removed by `down`.
iptables_rules() { # iptables_rules add|del
    local append=-A insert=-I
    if [ "$1" = del ]; then append=-D; insert=-D; fi
    iptables -t nat "$append" PREROUTING -i "$BRIDGE" -d "$KUBERNETES_SVC_IP" -p tcp --dport 443 \
        -m comment --comment "$TAG" -j DNAT --to-destination "$NODE_IP:$(cat "$state/apiserver.port")"
    iptables "$insert" FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -m comment --comment "$TAG" -j DROP
    iptables "$insert" FORWARD ! -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$TAG" -j DROP
}

start() { # start NAME COMMAND...: runs COMMAND in its own session, logs in $state/NAME.log
    local name=$1; shift
    setsid "$@" >"$state/$name.log" 2>&1 < /dev/null &
    echo $! >"$state/$name.pid"
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
    local deadline=$(( $(date +%s) + $1 )) what=$2; shift 2
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || die "timed out waiting for $what (logs in $state)"
        sleep 0.5
    done
}

up() {
    local assets=${VOLCANO_RS_NODE_ASSETS:-${KUBEBUILDER_ASSETS:-}}
    [ -n "$assets" ] || die "set VOLCANO_RS_NODE_ASSETS (or KUBEBUILDER_ASSETS) to the folder of the Kubernetes binaries"
    for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
        [ -x "$assets/$b" ] || die "$assets/$b is missing (docs/testing.md, \"The real-node suite\")"
    done
    for b in containerd containerd-shim-runc-v2 runc ctr iptables ip openssl podman python3; do
        command -v "$b" >/dev/null || die "$b is not installed (apt-get install containerd runc iptables podman openssl)"
    done
    [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] \
        || die "the CNI plugins are missing (apt-get install containernetworking-plugins)"
    [ "$(id -u)" = 0 ] || die "must run as root (containerd, kubelet, the pod network)"
    ! ip link show "$BRIDGE" >/dev/null 2>&1 || die "$BRIDGE exists: is another node running? (node.sh down DIR)"
    podman image exists "$PAUSE_IMAGE" || die "no $PAUSE_IMAGE in podman: run deploy/image/build.sh --test-images"

    mkdir -p "$state/pki" "$state/etcd" "$state/cni/net.d" "$state/cni/ipam" "$state/kubelet" "$state/pod-logs"

    # Network first: nothing a pod sends may follow the default route off the machine.
    ip link add "$BRIDGE" type bridge
    ip addr add "$NODE_IP/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    ip route add blackhole "$SERVICE_CIDR"
    echo "$(free_port)" >"$state/apiserver.port"
    iptables_rules add
    touch "$state/network.up"
    echo "nameserver 127.0.0.1" >"$state/resolv.conf"

    # Certificates: a CA, the API server's serving certificate (the node address, the
    # `kubernetes` ClusterIP and its DNS names), the service-account signing key.
    local pki=$state/pki
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=volcano-rs-e2e-ca \
        -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$pki/apiserver.key" \
        -out "$pki/apiserver.csr" 2>/dev/null
    printf 'subjectAltName=IP:%s,IP:%s,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost\n' \
        "$NODE_IP" "$KUBERNETES_SVC_IP" >"$pki/apiserver.ext"
    openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 2 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
    openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    local token
    token=$(openssl rand -hex 16)
    echo "$token,admin,1,\"system:masters\"" >"$pki/tokens.csv"

    local etcd_port etcd_peer api_port kcm_port ks_port kubelet_port kubelet_healthz
    etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(cat "$state/apiserver.port")
    kcm_port=$(free_port); ks_port=$(free_port); kubelet_port=$(free_port); kubelet_healthz=$(free_port)

    cat >"$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster:
      server: https://$NODE_IP:$api_port
      certificate-authority: $pki/ca.crt
users:
  - name: admin
    user:
      token: $token
contexts:
  - name: e2e
    context: {cluster: e2e, user: admin}
current-context: e2e
EOF

    start etcd "$assets/etcd" --name e2e --data-dir "$state/etcd" --unsafe-no-fsync=true \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "e2e=http://127.0.0.1:$etcd_peer"
    start kube-apiserver "$assets/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$api_port" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --cert-dir "$pki" \
        --token-auth-file "$pki/tokens.csv" --authorization-mode RBAC \
        --service-cluster-ip-range "$SERVICE_CIDR" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --allow-privileged=true --enable-aggregator-routing=true \
        --kubelet-preferred-address-types InternalIP
    wait_for 60 "the API server" kubectl --kubeconfig "$state/kubeconfig" get --raw /readyz

    start kube-controller-manager "$assets/kube-controller-manager" --kubeconfig "$state/kubeconfig" \
        --leader-elect=false --bind-address 127.0.0.1 --secure-port "$kcm_port" \
        --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
        --cluster-name e2e
    start kube-scheduler "$assets/kube-scheduler" --kubeconfig "$state/kubeconfig" \
        --leader-elect=false --bind-address 127.0.0.1 --secure-port "$ks_port"

    # containerd with a configuration of its own: root, state and socket here, the pause
    # image built here, cgroupfs, the CNI plugins of Debian with our bridge, and
    # restrict_oom_score_adj (this machine refuses a negative oom_score_adj).
    containerd config default >"$state/containerd.default.toml"
    python3 - "$state" "$PAUSE_IMAGE" <<'EOF'
import re, sys
state, pause = sys.argv[1], sys.argv[2]
t = open(f"{state}/containerd.default.toml").read()
def sub(pattern, repl):
    global t
    t, n = re.subn(pattern, repl, t, flags=re.M)
    if n == 0:
        sys.exit(f"node.sh: containerd's default configuration has no {pattern!r}")
sub(r'^root = .*$', f'root = "{state}/containerd/root"')
sub(r'^state = .*$', f'state = "{state}/containerd/state"')
sub(r'^(\s*)address = "/run/containerd/containerd.sock"', rf'\1address = "{state}/containerd.sock"')
sub(r'^(\s*)sandbox_image = .*$', rf'\1sandbox_image = "{pause}"')
sub(r'^(\s*)SystemdCgroup = .*$', r'\1SystemdCgroup = false')
sub(r'^(\s*)restrict_oom_score_adj = .*$', r'\1restrict_oom_score_adj = true')
sub(r'^(\s*)bin_dir = "/opt/cni/bin"', r'\1bin_dir = "/usr/lib/cni"')
sub(r'^(\s*)conf_dir = "/etc/cni/net.d"', rf'\1conf_dir = "{state}/cni/net.d"')
open(f"{state}/containerd.toml", "w").write(t)
EOF
    cat >"$state/cni/net.d/10-vrs.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "vrs",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$state/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "10.244.0.10", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
    # Every image is built here; a pull (an image missing by mistake) must fail here too,
    # not reach a registry: containerd's registry client goes through a proxy that is a
    # closed loopback port.
    start containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
        containerd --config "$state/containerd.toml"
    local ctr=(ctr --address "$state/containerd.sock" -n k8s.io)
    wait_for 30 "containerd" "${ctr[@]}" version
    # The images: the pause image, and whatever else podman holds of ours.
    local images=("$PAUSE_IMAGE")
    for i in localhost/volcano-rs:latest localhost/volcano-rs-jobcheck:latest; do
        podman image exists "$i" && images+=("$i")
    done
    podman save -q --multi-image-archive --format docker-archive -o "$state/images.tar" "${images[@]}" >/dev/null
    "${ctr[@]}" images import --all-platforms "$state/images.tar" >/dev/null
    rm -f "$state/images.tar"
    # The manifests name the image volcano-rs:latest, which Kubernetes reads as
    # docker.io/library/volcano-rs:latest.
    if podman image exists localhost/volcano-rs:latest; then
        "${ctr[@]}" images tag --force localhost/volcano-rs:latest docker.io/library/volcano-rs:latest >/dev/null
    fi

    cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$state/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
resolvConf: $state/resolv.conf
clusterDomain: cluster.local
podLogsDir: $state/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
serializeImagePulls: false
syncFrequency: 10s
EOF
    start kubelet "$assets/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$state/kubeconfig" \
        --root-dir "$state/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
    wait_for 120 "the node $NODE_NAME to be Ready" sh -c \
        "kubectl --kubeconfig '$state/kubeconfig' get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
    wait_for 60 "the default ServiceAccount" kubectl --kubeconfig "$state/kubeconfig" -n default get serviceaccount default
    echo "$state/kubeconfig"
}

down() {
    local ctr=(ctr --address "$state/containerd.sock" -n k8s.io)
    stop() {
        local f=$state/$1.pid
        [ -f "$f" ] || return 0
        local pid; pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    }
    # The kubelet first (so that it restarts nothing), then every container it left, so
    # that no shim outlives containerd.
    stop kubelet
    if [ -f "$state/containerd.pid" ] && "${ctr[@]}" version >/dev/null 2>&1; then
        for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
            "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
        done
        sleep 1
        for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
            "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true
        done
        for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do
            "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true
        done
    fi
    stop containerd
    stop kube-scheduler
    stop kube-controller-manager
    stop kube-apiserver
    stop etcd
    # The pods' network namespaces that the CNI plugin made, found by their veth's peer on
    # our bridge, and the mounts the kubelet and containerd left under the state folder.
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        if ip netns exec "$ns" ip -o addr show 2>/dev/null | grep -q ' 10\.244\.0\.'; then
            ip netns delete "$ns" 2>/dev/null || true
        fi
    done
    awk -v s="$state/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
    if [ -f "$state/network.up" ]; then
        iptables_rules del 2>/dev/null || true
        ip route del blackhole "$SERVICE_CIDR" 2>/dev/null || true
        ip link del "$BRIDGE" 2>/dev/null || true
        rm -f "$state/network.up"
    fi
}

case "$cmd" in
    up) up ;;
    down) down ;;
    *) die "usage: node.sh up|down STATE_DIR" ;;
esac
