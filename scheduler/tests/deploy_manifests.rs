//! The manifests of `deploy/` (not `deploy/crds/`, checked by the tidy test): every YAML
//! document is a well-formed Kubernetes object that the typed `k8s-openapi` structs read
//! without losing a field (so a misspelt field fails here, not in the cluster); the
//! Deployment's arguments are the scheduler's real command line; the ConfigMap it mounts
//! holds a configuration the scheduler accepts; the RBAC is exactly what the scheduler calls.
//!
//! With `KUBEBUILDER_ASSETS` (a directory with etcd and kube-apiserver; see
//! `volcano_testkit::apiserver`), the manifests are also applied to a real API server in the order
//! `kubectl apply -f deploy/crds/ -f deploy/` uses, and the scheduler runs with the
//! ServiceAccount's own token: the RBAC is enough to schedule, and denies the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use serde_json::Value;
use volcano_scheduler::options::{parse_listen_address, SchedulerOptions};

/// The scheduler's command line, as `volcano-rs scheduler` parses it.
#[derive(Parser)]
struct W {
    #[command(flatten)]
    o: SchedulerOptions,
}

const NAMESPACE: &str = "volcano-system";
const CONFIG_MOUNT: &str = "/volcano.scheduler";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// One YAML document of a file.
struct Doc {
    file: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }
    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }
    fn at(&self) -> String {
        format!("{}: {} {}", self.file, self.kind(), self.name())
    }
}

/// The `*.yaml` files of `dir` in the order kubectl applies them (lexical), without
/// subdirectories (kubectl does not recurse without `-R`).
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")))
        .collect();
    files.sort();
    files
}

/// Every non-empty document of every `deploy/*.yaml`, in kubectl's order.
fn documents() -> Vec<Doc> {
    let mut docs = Vec::new();
    for path in yaml_files(&deploy_dir()) {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, de) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
            let value: Value = serde::Deserialize::deserialize(de)
                .unwrap_or_else(|e| panic!("{file}: document {}: not YAML: {e}", i + 1));
            if value.is_null() {
                continue;
            }
            docs.push(Doc { file: file.clone(), value });
        }
    }
    docs
}

/// Reads `doc` as `T` and checks that nothing was lost: the typed object written back is
/// the document (an unknown or misspelt field would be dropped silently by serde).
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Doc) -> T {
    let t: T = serde_json::from_value(doc.value.clone()).unwrap_or_else(|e| panic!("{}: {e}", doc.at()));
    let back = serde_json::to_value(&t).unwrap();
    if back != doc.value {
        panic!(
            "{}: fields the Kubernetes type does not know (misspelt or misplaced?)\n  written: {}\n  read:    {}",
            doc.at(),
            doc.value,
            back
        );
    }
    t
}

fn one<'a>(docs: &'a [Doc], kind: &str, name: &str) -> &'a Doc {
    let found: Vec<&Doc> = docs.iter().filter(|d| d.kind() == kind && d.name() == name).collect();
    assert_eq!(found.len(), 1, "exactly one {kind} {name} in deploy/*.yaml");
    found[0]
}

/// The manifests, typed.
struct Manifests {
    docs: Vec<Doc>,
    deployment: Deployment,
    service_account: ServiceAccount,
    cluster_role: ClusterRole,
    cluster_role_binding: ClusterRoleBinding,
    lease_role: Role,
    lease_role_binding: RoleBinding,
    config_map: ConfigMap,
}

fn manifests() -> Manifests {
    let docs = documents();
    for d in &docs {
        for field in ["apiVersion", "kind"] {
            assert!(d.value[field].as_str().is_some_and(|s| !s.is_empty()), "{}: no {field}", d.at());
        }
        assert!(!d.name().is_empty(), "{}: no metadata.name", d.at());
        // Every object is read by its type, whatever its name.
        match (d.value["apiVersion"].as_str().unwrap(), d.kind()) {
            ("v1", "Namespace") => drop(typed::<Namespace>(d)),
            ("v1", "ServiceAccount") => drop(typed::<ServiceAccount>(d)),
            ("v1", "ConfigMap") => drop(typed::<ConfigMap>(d)),
            ("v1", "Service") => drop(typed::<Service>(d)),
            ("apps/v1", "Deployment") => drop(typed::<Deployment>(d)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => drop(typed::<ClusterRole>(d)),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => drop(typed::<ClusterRoleBinding>(d)),
            ("rbac.authorization.k8s.io/v1", "Role") => drop(typed::<Role>(d)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => drop(typed::<RoleBinding>(d)),
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                drop(typed::<MutatingWebhookConfiguration>(d))
            }
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                drop(typed::<ValidatingWebhookConfiguration>(d))
            }
            (api, kind) => panic!("{}: {api} {kind} is not a kind this test knows; add it", d.at()),
        }
        let cluster_scoped = matches!(
            d.kind(),
            "Namespace"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "MutatingWebhookConfiguration"
                | "ValidatingWebhookConfiguration"
        );
        let ns = d.value["metadata"]["namespace"].as_str();
        if cluster_scoped {
            assert_eq!(ns, None, "{}: cluster-scoped, no namespace", d.at());
        } else {
            assert_eq!(ns, Some(NAMESPACE), "{}: every namespaced object lives in {NAMESPACE}", d.at());
        }
    }
    let mut seen = BTreeSet::new();
    for d in &docs {
        let key = (d.kind().to_string(), d.value["metadata"]["namespace"].clone().to_string(), d.name().to_string());
        assert!(seen.insert(key), "{}: defined twice", d.at());
    }
    Manifests {
        deployment: typed(one(&docs, "Deployment", "volcano-rs-scheduler")),
        service_account: typed(one(&docs, "ServiceAccount", "volcano-rs-scheduler")),
        cluster_role: typed(one(&docs, "ClusterRole", "volcano-rs-scheduler")),
        cluster_role_binding: typed(one(&docs, "ClusterRoleBinding", "volcano-rs-scheduler")),
        lease_role: typed(one(&docs, "Role", "volcano-rs-scheduler-leader-election")),
        lease_role_binding: typed(one(&docs, "RoleBinding", "volcano-rs-scheduler-leader-election")),
        config_map: typed(one(&docs, "ConfigMap", "volcano-scheduler-configmap")),
        docs,
    }
}

/// The Deployment's container arguments as the scheduler reads them.
fn scheduler_options(deployment: &Deployment) -> SchedulerOptions {
    let container = &deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
    assert!(container.command.is_none(), "the image's ENTRYPOINT (volcano-rs) runs: no command");
    let args = container.args.clone().expect("args");
    assert_eq!(args.first().map(String::as_str), Some("scheduler"), "the subcommand comes first: {args:?}");
    let w = W::try_parse_from(std::iter::once("volcano-rs scheduler").chain(args[1..].iter().map(String::as_str)))
        .unwrap_or_else(|e| panic!("the Deployment's args {args:?} do not parse:\n{e}"));
    w.o.validate().unwrap_or_else(|e| panic!("the Deployment's args {args:?}: {e}"));
    w.o
}

/// (API group, resource, verb) triples a set of rules grants; no wildcard, no resource names.
fn grants(rules: &[PolicyRule], at: &str) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for r in rules {
        assert!(r.non_resource_urls.is_none(), "{at}: no non-resource URLs");
        let groups = r.api_groups.clone().unwrap_or_default();
        let resources = r.resources.clone().unwrap_or_default();
        assert!(!groups.is_empty() && !resources.is_empty() && !r.verbs.is_empty(), "{at}: an empty rule {r:?}");
        for s in groups.iter().chain(&resources).chain(&r.verbs) {
            assert!(!s.contains('*'), "{at}: wildcard {s:?} in {r:?}");
        }
        for g in &groups {
            for res in &resources {
                for v in &r.verbs {
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

fn triples(list: &[(&str, &str, &[&str])]) -> BTreeSet<(String, String, String)> {
    list.iter().flat_map(|(g, r, vs)| vs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string()))).collect()
}

/// What the scheduler calls, cluster-wide (scheduler/src/run.rs, applier.rs; kube-runtime's
/// event Recorder).
fn expected_cluster_grants() -> BTreeSet<(String, String, String)> {
    triples(&[
        ("", "nodes", &["list", "watch"]),
        ("", "pods", &["list", "watch", "patch", "delete"]),
        ("", "pods/binding", &["create"]),
        ("", "pods/status", &["patch"]),
        ("events.k8s.io", "events", &["create", "patch"]),
        ("scheduling.k8s.io", "priorityclasses", &["list", "watch"]),
        ("", "namespaces", &["list", "watch"]),
        ("", "persistentvolumeclaims", &["list", "watch"]),
        ("", "persistentvolumes", &["list", "watch"]),
        ("storage.k8s.io", "storageclasses", &["list", "watch"]),
        ("storage.k8s.io", "csinodes", &["list", "watch"]),
        ("", "services", &["list", "watch"]),
        ("", "replicationcontrollers", &["list", "watch"]),
        ("apps", "replicasets", &["list", "watch"]),
        ("apps", "statefulsets", &["list", "watch"]),
        ("topology.volcano.sh", "hypernodes", &["list", "watch"]),
        ("scheduling.volcano.sh", "podgroups", &["list", "watch", "create", "patch"]),
        ("scheduling.volcano.sh", "queues", &["list", "watch", "create"]),
        ("scheduling.volcano.sh", "queues/status", &["patch"]),
    ])
}

fn binds(role_ref: &RoleRef, subjects: &Option<Vec<Subject>>, kind: &str, role: &str, sa: &ServiceAccount) -> bool {
    role_ref.api_group == "rbac.authorization.k8s.io"
        && role_ref.kind == kind
        && role_ref.name == role
        && subjects.iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && Some(&s.name) == sa.metadata.name.as_ref()
                && s.namespace.as_ref() == sa.metadata.namespace.as_ref()
        })
}

#[test]
fn every_document_is_a_typed_object_in_apply_order() {
    let m = manifests();
    let files: Vec<String> =
        yaml_files(&deploy_dir()).iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    // `kubectl apply -f deploy/` creates objects file by file, in lexical order: the
    // namespace first, then what lives in it.
    let ns_file = &one(&m.docs, "Namespace", NAMESPACE).file;
    for d in m.docs.iter().filter(|d| d.value["metadata"]["namespace"].as_str() == Some(NAMESPACE)) {
        assert!(
            files.iter().position(|f| f == ns_file) < files.iter().position(|f| *f == d.file),
            "{}: applied before {ns_file} creates the namespace",
            d.at()
        );
    }
    assert!(m.docs.iter().all(|d| d.kind() != "CustomResourceDefinition"), "CRDs live in deploy/crds/");
    assert!(deploy_dir().join("crds/scheduling.volcano.sh_podgroups.yaml").is_file());
}

/// The image is built from nothing that must be pulled (deploy/image/Containerfile: `FROM
/// scratch` and the static binary that deploy/image/build.sh compiles), runs as a numeric
/// non-root user, and its entrypoint is the binary the Deployments run.
#[test]
fn the_image_is_built_from_scratch_with_the_static_binary() {
    let dir = deploy_dir().join("image");
    let containerfile = std::fs::read_to_string(dir.join("Containerfile")).unwrap();
    let instructions: Vec<&str> =
        containerfile.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let froms: Vec<&&str> = instructions.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms, [&"FROM scratch"], "deploy/image/Containerfile pulls nothing");
    assert!(instructions.contains(&"COPY volcano-rs /usr/local/bin/volcano-rs"), "{instructions:?}");
    assert!(instructions.contains(&r#"ENTRYPOINT ["/usr/local/bin/volcano-rs"]"#), "{instructions:?}");
    let user = instructions.iter().find_map(|l| l.strip_prefix("USER ")).expect("a USER");
    let uid: u32 = user.split(':').next().unwrap().parse().expect("a numeric user, for runAsNonRoot");
    assert_ne!(uid, 0, "not root");
    let script = std::fs::read_to_string(dir.join("build.sh")).unwrap();
    assert!(script.contains("+crt-static") && script.contains("-p volcano-rs"), "build.sh builds the static binary");
    assert!(script.contains("--pull=never"), "build.sh never pulls");
    assert!(
        !deploy_dir().join("Dockerfile").exists(),
        "deploy/Dockerfile pulled base images; deploy/image replaces it"
    );
}

/// `kubectl apply -k deploy/` installs every manifest that `kubectl apply -f deploy/crds/ -f
/// deploy/` does: deploy/Kustomization lists each of them, and there is no
/// `kustomization.yaml`, which `kubectl apply -f deploy/` would try to create as an object.
#[test]
fn the_kustomization_lists_every_manifest() {
    let text = std::fs::read_to_string(deploy_dir().join("Kustomization")).unwrap();
    let k: Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(k["apiVersion"], "kustomize.config.k8s.io/v1beta1");
    assert_eq!(k["kind"], "Kustomization");
    let listed: Vec<&str> = k["resources"].as_array().expect("resources").iter().map(|r| r.as_str().unwrap()).collect();
    let unique: BTreeSet<&str> = listed.iter().copied().collect();
    assert_eq!(unique.len(), listed.len(), "a resource listed twice: {listed:?}");
    let mut expected = BTreeSet::new();
    for (sub, prefix) in [(deploy_dir().join("crds"), "crds/"), (deploy_dir(), "")] {
        for f in yaml_files(&sub) {
            expected.insert(format!("{prefix}{}", f.file_name().unwrap().to_string_lossy()));
        }
    }
    let listed: BTreeSet<String> = unique.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, expected, "deploy/Kustomization and the files of deploy/ and deploy/crds/");
    for name in ["kustomization.yaml", "kustomization.yml"] {
        assert!(!deploy_dir().join(name).exists(), "deploy/{name} would break `kubectl apply -f deploy/`");
    }
}

#[test]
fn deployment_runs_the_scheduler_as_documented() {
    let m = manifests();
    let o = scheduler_options(&m.deployment);
    assert!(o.leader_elect, "two replicas need leader election");
    assert_eq!(o.lease_namespace, NAMESPACE);
    assert_eq!(o.scheduler_names, ["volcano-rs"]);
    assert_eq!(o.lease_name.as_deref(), Some("volcano-rs"), "the Lease name is pinned (rbac.yaml names it)");

    let spec = m.deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let template_labels = spec.template.metadata.as_ref().and_then(|md| md.labels.clone()).unwrap_or_default();
    let selector = spec.selector.match_labels.clone().expect("matchLabels");
    assert!(selector.iter().all(|(k, v)| template_labels.get(k) == Some(v)), "the selector selects the pods");
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name, m.service_account.metadata.name);
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-cluster-critical"));
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("volcano-rs:latest"));

    // Security: non-root, read-only root, no capabilities.
    let psc = pod.security_context.clone().unwrap_or_default();
    let csc = c.security_context.clone().expect("a container securityContext");
    assert!(csc.run_as_non_root.or(psc.run_as_non_root) == Some(true), "runAsNonRoot");
    assert!(csc.run_as_user.or(psc.run_as_user).is_some_and(|u| u != 0), "a numeric non-root user");
    assert_eq!(csc.read_only_root_filesystem, Some(true));
    assert_eq!(csc.allow_privilege_escalation, Some(false));
    let caps = csc.capabilities.expect("capabilities");
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
    assert!(caps.add.is_none_or(|a| a.is_empty()));

    // The downward API.
    let env: BTreeMap<String, String> = c
        .env
        .iter()
        .flatten()
        .filter_map(|e| {
            let path = e.value_from.as_ref()?.field_ref.as_ref()?.field_path.clone();
            Some((e.name.clone(), path))
        })
        .collect();
    assert_eq!(env.get("POD_NAME").map(String::as_str), Some("metadata.name"));
    assert_eq!(env.get("POD_NAMESPACE").map(String::as_str), Some("metadata.namespace"));

    // Ports and probes match the listen addresses.
    let ports: BTreeMap<String, i32> =
        c.ports.iter().flatten().map(|p| (p.name.clone().unwrap_or_default(), p.container_port)).collect();
    let metrics_port = i32::from(parse_listen_address(&o.listen_address).unwrap().port());
    let health_port = i32::from(parse_listen_address(&o.healthz_address).unwrap().port());
    assert_eq!(ports.get("metrics"), Some(&metrics_port), "port `metrics` is --listen-address's");
    for (probe, path) in [(&c.liveness_probe, "/healthz"), (&c.readiness_probe, "/readyz")] {
        let get = probe.as_ref().and_then(|p| p.http_get.clone()).unwrap_or_else(|| panic!("an HTTP probe on {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        let port = match get.port {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(p) => p,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(n) => ports[&n],
        };
        assert_eq!(port, health_port, "{path} is served on --healthz-address");
    }
    let requests = c.resources.as_ref().and_then(|r| r.requests.clone()).unwrap_or_default();
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"), "resource requests");

    // The configuration: the ConfigMap mounted as a directory (no subPath, so that updates
    // reach the pod), and the file the scheduler reads is one of its keys.
    let conf = o.scheduler_conf.clone().expect("--scheduler-conf");
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|v| conf.starts_with(&v.mount_path))
        .expect("--scheduler-conf lies in a volume mount");
    assert_eq!(mount.mount_path, CONFIG_MOUNT);
    assert!(
        mount.sub_path.is_none() && mount.sub_path_expr.is_none(),
        "no subPath: ConfigMap updates must reach the pod"
    );
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("the mounted volume");
    let cm = volume.config_map.as_ref().expect("a ConfigMap volume");
    assert_eq!(Some(&cm.name), m.config_map.metadata.name.as_ref());
    assert!(cm.items.is_none(), "every key of the ConfigMap is mounted");
    let key = conf.strip_prefix(CONFIG_MOUNT).unwrap().to_str().unwrap().trim_start_matches('/');
    let text = m.config_map.data.as_ref().and_then(|d| d.get(key)).unwrap_or_else(|| panic!("ConfigMap key {key}"));
    let file = std::env::temp_dir().join(format!("volcano-rs-deploy-conf-{}.conf", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let loaded = volcano_scheduler::config::load_profile(&file, &volcano_builtin::registries());
    let _ = std::fs::remove_file(&file);
    loaded.unwrap_or_else(|e| panic!("the ConfigMap's {key}: {e}"));

    // The scheduler's metrics Service selects its pods and targets the metrics port.
    for d in m.docs.iter().filter(|d| d.kind() == "Service" && d.name().starts_with("volcano-rs-scheduler")) {
        let svc: Service = typed(d);
        let s = svc.spec.expect("a Service spec");
        let sel = s.selector.expect("a selector");
        assert!(sel.iter().all(|(k, v)| template_labels.get(k) == Some(v)), "{}: selects the scheduler pods", d.at());
        for p in s.ports.iter().flatten() {
            if let Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(n)) = &p.target_port {
                assert!(ports.contains_key(n), "{}: target port {n} is a container port", d.at());
            }
        }
    }
}

#[test]
fn rbac_is_exactly_what_the_scheduler_calls() {
    let m = manifests();
    let o = scheduler_options(&m.deployment);
    for d in m.docs.iter().filter(|d| matches!(d.kind(), "ClusterRole" | "Role")) {
        let rules: Vec<PolicyRule> = serde_json::from_value(d.value["rules"].clone()).unwrap();
        grants(&rules, &d.at());
    }
    let cluster = grants(m.cluster_role.rules.as_deref().unwrap_or_default(), "ClusterRole");
    assert!(cluster.contains(&("".into(), "pods/binding".into(), "create".into())));
    let want = expected_cluster_grants();
    let extra: Vec<_> = cluster.difference(&want).collect();
    let missing: Vec<_> = want.difference(&cluster).collect();
    assert!(extra.is_empty() && missing.is_empty(), "ClusterRole: extra {extra:?}, missing {missing:?}");
    assert!(
        m.cluster_role.rules.iter().flatten().all(|r| r.resource_names.is_none()),
        "cluster rules apply to every object"
    );
    assert!(m.cluster_role.aggregation_rule.is_none());

    // Leases: in the lease namespace, create, and get/update of the scheduler's Lease.
    assert_eq!(m.lease_role.metadata.namespace.as_deref(), Some(o.lease_namespace.as_str()));
    let lease_rules = m.lease_role.rules.clone().unwrap_or_default();
    let lease = grants(&lease_rules, "Role");
    let want = triples(&[("coordination.k8s.io", "leases", &["get", "create", "update"])]);
    assert_eq!(lease, want, "the leader-election Role");
    for r in &lease_rules {
        if let Some(names) = &r.resource_names {
            assert!(names.contains(&o.lease_name()), "the Role names the Lease {}: {names:?}", o.lease_name());
            assert!(!r.verbs.iter().any(|v| v == "create"), "create cannot be restricted by name");
        }
    }

    // The bindings give both to the Deployment's ServiceAccount.
    let sa = &m.service_account;
    assert_eq!(sa.metadata.namespace.as_deref(), Some(NAMESPACE));
    let crb = &m.cluster_role_binding;
    let cr_name = m.cluster_role.metadata.name.as_deref().unwrap();
    assert!(binds(&crb.role_ref, &crb.subjects, "ClusterRole", cr_name, sa), "the ClusterRoleBinding");
    let rb = &m.lease_role_binding;
    assert_eq!(rb.metadata.namespace, m.lease_role.metadata.namespace);
    assert!(
        binds(&rb.role_ref, &rb.subjects, "Role", m.lease_role.metadata.name.as_deref().unwrap(), sa),
        "the RoleBinding"
    );
}

// ---------------------------------------------------------------------------------------
// Against a real API server (KUBEBUILDER_ASSETS).

/// The log lines of the scheduler run, to look for refused calls.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = LogBuffer;
    fn make_writer(&'a self) -> LogBuffer {
        self.clone()
    }
}

/// Whether the ServiceAccount may do `verb` on `resource` (a SubjectAccessReview).
async fn allowed(client: &kube::Client, group: &str, resource: &str, verb: &str, ns: &str, name: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let (resource, sub) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{NAMESPACE}:volcano-rs-scheduler")),
            groups: Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{NAMESPACE}")]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource: sub,
                verb: Some(verb.into()),
                namespace: (!ns.is_empty()).then(|| ns.to_string()),
                name: (!name.is_empty()).then(|| name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
    let answer = api.create(&kube::api::PostParams::default(), &review).await.expect("a SubjectAccessReview");
    answer.status.is_some_and(|s| s.allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn manifests_apply_and_the_service_account_can_schedule() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
    use volcano_api::crd::{PodGroup, PodGroupPhase, Queue};
    use volcano_testkit::apiserver::{self as support, eventually, ApiServer};

    let Some(assets) = support::assets() else { return };
    let log = LogBuffer::default();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(log.clone())
        .with_ansi(false)
        .try_init();
    let wait = Duration::from_secs(30);
    let server = ApiServer::start(&assets).await;
    let admin = server.client().await;

    // `kubectl apply -f deploy/crds/ -f deploy/`: CRDs first, then deploy/*.yaml in order.
    server.install_crds().await;
    server.apply_files(&yaml_files(&deploy_dir())).await;
    // Applied twice: nothing conflicts (kubectl apply is run again on upgrades).
    server.apply_files(&yaml_files(&deploy_dir())).await;

    // The RBAC, as the API server's authorizer reads it.
    for (group, resource, verb) in expected_cluster_grants() {
        assert!(allowed(&admin, &group, &resource, &verb, "team-a", "").await, "{group} {resource} {verb}: allowed");
    }
    for (group, resource, verb) in [
        ("", "secrets", "get"),
        ("", "secrets", "list"),
        ("", "pods", "update"),
        ("", "pods", "create"),
        ("", "nodes", "patch"),
        ("", "pods/eviction", "create"),
        ("", "events", "create"),
        ("scheduling.volcano.sh", "queues", "delete"),
        ("scheduling.volcano.sh", "podgroups", "delete"),
        ("coordination.k8s.io", "leases", "create"),
        ("apps", "deployments", "get"),
        ("apps", "replicasets", "update"),
        ("", "services", "create"),
    ] {
        assert!(!allowed(&admin, group, resource, verb, "team-a", "").await, "{group} {resource} {verb}: denied");
    }
    for verb in ["get", "create", "update"] {
        assert!(allowed(&admin, "coordination.k8s.io", "leases", verb, NAMESPACE, "volcano-rs").await, "leases {verb}");
    }
    assert!(!allowed(&admin, "coordination.k8s.io", "leases", "update", NAMESPACE, "kube-scheduler").await);
    assert!(!allowed(&admin, "coordination.k8s.io", "leases", "delete", NAMESPACE, "volcano-rs").await);

    // The scheduler with the ServiceAccount's token, the Deployment's arguments and the
    // ConfigMap's configuration: it leads, creates the default queues, adopts a plain pod
    // and binds it, with no call refused.
    let kubeconfig = server.service_account_kubeconfig(NAMESPACE, "volcano-rs-scheduler").await;
    let dir = kubeconfig.parent().unwrap().to_path_buf();
    let m = manifests();
    let mut o = scheduler_options(&m.deployment);
    let conf = dir.join("volcano-scheduler.conf");
    std::fs::write(&conf, &m.config_map.data.as_ref().unwrap()["volcano-scheduler.conf"]).unwrap();
    o.scheduler_conf = Some(conf);
    o.kubeconfig = Some(kubeconfig);
    o.listen_address = String::new();
    o.healthz_address = String::new();
    o.schedule_period = Duration::from_millis(200);
    o.identity = Some("deploy-test-replica".into());

    let nodes: Api<Node> = Api::all(admin.clone());
    let res: BTreeMap<String, Quantity> = [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
        .into_iter()
        .map(|(k, v)| (k.into(), Quantity(v.into())))
        .collect();
    let node = Node {
        metadata: ObjectMeta { name: Some("deploy-n1".into()), ..Default::default() },
        status: Some(NodeStatus { allocatable: Some(res.clone()), capacity: Some(res), ..Default::default() }),
        ..Default::default()
    };
    nodes.create(&PostParams::default(), &node).await.unwrap();
    // No node controller: take the not-ready taint away, and set the capacity.
    nodes
        .patch("deploy-n1", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"taints": null}})))
        .await
        .unwrap();
    nodes
        .patch_status("deploy-n1", &PatchParams::default(), &Patch::Merge(serde_json::json!({"status": node.status})))
        .await
        .unwrap();
    server.namespace("team-a").await;

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let join = tokio::spawn(volcano_scheduler::run::run(
        o,
        async move {
            let _ = stop_rx.await;
        },
        Some(started_tx),
    ));
    let handle =
        tokio::time::timeout(wait, started_rx).await.expect("the scheduler syncs its caches").expect("a handle");

    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    let pod = |name: &str, node_selector: Option<(&str, &str)>| Pod {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some("team-a".into()), ..Default::default() },
        spec: Some(PodSpec {
            scheduler_name: Some("volcano-rs".into()),
            node_selector: node_selector.map(|(k, v)| [(k.to_string(), v.to_string())].into_iter().collect()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some([("cpu".to_string(), Quantity("1".into()))].into_iter().collect()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let web = pods.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    // Fits no node: a PodScheduled=False condition (pods/status) and an event.
    pods.create(&PostParams::default(), &pod("nowhere", Some(("pool", "none")))).await.unwrap();

    let leases: Api<Lease> = Api::namespaced(admin.clone(), NAMESPACE);
    eventually(wait, "the Lease volcano-system/volcano-rs held", || async {
        let l = leases.get_opt("volcano-rs").await.ok()??;
        (l.spec?.holder_identity.as_deref() == Some("deploy-test-replica")).then_some(())
    })
    .await;
    let queues: Api<Queue> = Api::all(admin.clone());
    eventually(wait, "queues root and default created", || async {
        (queues.get_opt("root").await.ok()?.is_some() && queues.get_opt("default").await.ok()?.is_some()).then_some(())
    })
    .await;
    eventually(wait, "web bound", || async { pods.get("web").await.ok()?.spec?.node_name }).await;
    let pgs: Api<PodGroup> = Api::namespaced(admin.clone(), "team-a");
    let pg_name = format!("podgroup-{}", web.metadata.uid.unwrap());
    eventually(wait, "web's PodGroup Running", || async {
        (pgs.get(&pg_name).await.ok()?.status?.phase == Some(PodGroupPhase::Running)).then_some(())
    })
    .await;
    eventually(wait, "nowhere marked unschedulable", || async {
        let conditions = pods.get("nowhere").await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False").then_some(())
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), "team-a");
    eventually(wait, "events recorded", || async {
        let list = events.list(&Default::default()).await.ok()?;
        let reasons: BTreeSet<&str> = list.items.iter().filter_map(|e| e.reason.as_deref()).collect();
        (reasons.contains("Scheduled") && reasons.contains("FailedScheduling")).then_some(())
    })
    .await;
    assert!(*handle.leading.borrow());

    let _ = stop_tx.send(());
    join.await.expect("the scheduler task ends").expect("the scheduler stops cleanly");
    let text = String::from_utf8_lossy(&log.0.lock().unwrap()).to_lowercase();
    assert!(!text.contains("forbidden"), "a call was refused (the RBAC misses a permission):\n{text}");
}
