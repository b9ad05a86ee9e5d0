//! A real API server for tests: etcd and kube-apiserver started from the directory named by
//! `KUBEBUILDER_ASSETS` (the envtest convention; see docs/testing.md), on free loopback
//! ports, with a token and a kubeconfig, stopped when the [`ApiServer`] is dropped (also
//! when a test panics). Behind the `apiserver` feature; used by the real-API-server suites
//! of the scheduler, the webhook and the controller.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

const TOKEN: &str = "volcano-rs-test-token";

/// A running etcd + kube-apiserver.
pub struct ApiServer {
    etcd: Child,
    apiserver: Child,
    /// The kube-apiserver binary and its arguments, to start it again on the same port.
    command: (PathBuf, Vec<String>),
    dir: PathBuf,
    /// A kubeconfig file for the admin token.
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.apiserver.kill();
        let _ = self.apiserver.wait();
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts kube-apiserver, appending to its log.
fn spawn_apiserver((binary, args): &(PathBuf, Vec<String>), dir: &Path) -> Child {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join("kube-apiserver.log")).expect("log file");
    Command::new(binary).args(args).stdout(Stdio::null()).stderr(log).spawn().expect("kube-apiserver starts")
}

/// A local port free now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("address").port()
}

/// The assets directory, or `None` (with a message) when the suite must be skipped.
pub fn assets() -> Option<PathBuf> {
    match std::env::var_os("KUBEBUILDER_ASSETS") {
        Some(dir) if Path::new(&dir).join("kube-apiserver").exists() && Path::new(&dir).join("etcd").exists() => {
            Some(PathBuf::from(dir))
        }
        Some(dir) => {
            eprintln!(
                "SKIPPED: KUBEBUILDER_ASSETS={} has no etcd and kube-apiserver; see docs/testing.md",
                PathBuf::from(dir).display()
            );
            None
        }
        None => {
            eprintln!(
                "SKIPPED: the real-API-server suite needs KUBEBUILDER_ASSETS (a directory with etcd and \
                 kube-apiserver); see docs/testing.md"
            );
            None
        }
    }
}

impl ApiServer {
    /// Starts etcd and kube-apiserver and waits until the API server is ready.
    pub async fn start(assets: &Path) -> ApiServer {
        let dir = std::env::temp_dir().join(format!(
            "volcano-rs-envtest-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (client_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let log = |name: &str| std::fs::File::create(dir.join(name)).expect("log file");
        let etcd = Command::new(assets.join("etcd"))
            .args([
                "--name",
                "envtest",
                "--data-dir",
                dir.join("etcd").to_str().unwrap(),
                "--listen-client-urls",
                &format!("http://127.0.0.1:{client_port}"),
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{client_port}"),
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{peer_port}"),
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer_port}"),
                "--initial-cluster",
                &format!("envtest=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync=true",
            ])
            .stdout(Stdio::null())
            .stderr(log("etcd.log"))
            .spawn()
            .expect("etcd starts");
        // The service-account signing key.
        let key = dir.join("sa.key");
        let public = dir.join("sa.pub");
        let ok = Command::new("openssl")
            .args(["genrsa", "-out", key.to_str().unwrap(), "2048"])
            .stderr(Stdio::null())
            .status()
            .expect("openssl runs")
            .success()
            && Command::new("openssl")
                .args(["rsa", "-in", key.to_str().unwrap(), "-pubout", "-out", public.to_str().unwrap()])
                .stderr(Stdio::null())
                .status()
                .expect("openssl runs")
                .success();
        assert!(ok, "openssl could not make the service-account key");
        let mut tokens = std::fs::File::create(dir.join("token.csv")).unwrap();
        writeln!(tokens, "{TOKEN},admin,1,\"system:masters\"").unwrap();
        let args: Vec<String> = [
            "--etcd-servers",
            &format!("http://127.0.0.1:{client_port}"),
            "--bind-address",
            "127.0.0.1",
            "--advertise-address",
            "127.0.0.1",
            "--secure-port",
            &api_port.to_string(),
            "--cert-dir",
            dir.join("certs").to_str().unwrap(),
            "--token-auth-file",
            dir.join("token.csv").to_str().unwrap(),
            "--authorization-mode",
            "RBAC",
            "--service-cluster-ip-range",
            "10.0.0.0/24",
            "--service-account-issuer",
            "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file",
            public.to_str().unwrap(),
            "--service-account-signing-key-file",
            key.to_str().unwrap(),
            "--disable-admission-plugins",
            "ServiceAccount",
            "--allow-privileged=true",
        ]
        .map(str::to_string)
        .into();
        let command = (assets.join("kube-apiserver"), args);
        let apiserver = spawn_apiserver(&command, &dir);
        let url = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {url}\n    \
                 insecure-skip-tls-verify: true\nusers:\n- name: admin\n  user:\n    token: {TOKEN}\ncontexts:\n- \
                 name: envtest\n  context:\n    cluster: envtest\n    user: admin\ncurrent-context: envtest\n"
            ),
        )
        .unwrap();
        let server = ApiServer { etcd, apiserver, command, dir, kubeconfig, url };
        server.wait_ready(Duration::from_secs(60)).await;
        server
    }

    /// Waits until `GET /readyz` answers `ok`, failing the test after `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) {
        let server = self;
        let start = Instant::now();
        loop {
            if let Ok(client) = server.try_client().await {
                let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
                let answer = tokio::time::timeout(Duration::from_secs(1), client.request_text(req)).await;
                if let Ok(Ok(text)) = answer {
                    if text.trim() == "ok" {
                        break;
                    }
                }
            }
            assert!(
                start.elapsed() < timeout,
                "kube-apiserver not ready after {timeout:?}; see {}",
                server.dir.join("kube-apiserver.log").display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills kube-apiserver (SIGKILL), leaving etcd and its data running.
    pub fn kill_apiserver(&mut self) {
        let _ = self.apiserver.kill();
        let _ = self.apiserver.wait();
    }

    /// Starts kube-apiserver again, on the same port with the same etcd, after
    /// [`kill_apiserver`](Self::kill_apiserver); returns at once (see
    /// [`wait_ready`](Self::wait_ready)).
    pub fn restart_apiserver(&mut self) {
        self.apiserver = spawn_apiserver(&self.command, &self.dir);
    }

    /// Stops kube-apiserver with SIGSTOP (its connections stay open and silent) or, with
    /// `paused` false, lets it go on with SIGCONT.
    pub fn pause_apiserver(&self, paused: bool) {
        let signal = if paused { "-STOP" } else { "-CONT" };
        let ok = Command::new("kill")
            .args([signal, &self.apiserver.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {signal} kube-apiserver");
    }

    /// The memory of etcd and of kube-apiserver now, from `/proc` (Linux): resident and
    /// peak resident set sizes in MiB, `None` where `/proc` does not say. kube-apiserver's
    /// peak counts from its last start.
    pub fn memory(&self) -> Memory {
        Memory { etcd: process_memory(self.etcd.id()), apiserver: process_memory(self.apiserver.id()) }
    }

    async fn try_client(&self) -> Result<Client, String> {
        let kc = Kubeconfig::read_from(&self.kubeconfig).map_err(|e| e.to_string())?;
        let config =
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(|e| e.to_string())?;
        Client::try_from(config).map_err(|e| e.to_string())
    }

    /// An admin client.
    pub async fn client(&self) -> Client {
        self.try_client().await.expect("a client")
    }

    /// Installs the CRDs of `deploy/crds` and waits until they are established.
    pub async fn install_crds(&self) {
        let client = self.client().await;
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("deploy/crds") {
            let path = entry.unwrap().path();
            let crd: CustomResourceDefinition =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).expect("a CRD");
            names.push(crd.metadata.name.clone().unwrap());
            api.create(&PostParams::default(), &crd).await.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        let start = Instant::now();
        for name in names {
            loop {
                let crd = api.get(&name).await.unwrap();
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
                if established {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(30), "CRD {name} not established");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Applies (server-side, strict field validation) every document of `files` in order,
    /// as `kubectl apply` would.
    pub async fn apply_files(&self, files: &[PathBuf]) {
        use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
        use kube::discovery::{Discovery, Scope};
        let client = self.client().await;
        let discovery = Discovery::new(client.clone()).run().await.expect("discovery");
        for path in files {
            let text = std::fs::read_to_string(path).unwrap();
            for de in serde_yaml_ng::Deserializer::from_str(&text) {
                let value: serde_json::Value = serde::Deserialize::deserialize(de).unwrap();
                if value.is_null() {
                    continue;
                }
                let obj: DynamicObject = serde_json::from_value(value.clone()).unwrap();
                let types = obj.types.clone().expect("apiVersion and kind");
                let gvk = GroupVersionKind::try_from(&types).unwrap();
                let (ar, caps) =
                    discovery.resolve_gvk(&gvk).unwrap_or_else(|| panic!("{}: unknown kind {gvk:?}", path.display()));
                let name = obj.metadata.name.clone().unwrap();
                let api: Api<DynamicObject> = match caps.scope {
                    Scope::Namespaced => {
                        Api::namespaced_with(client.clone(), obj.metadata.namespace.as_deref().unwrap(), &ar)
                    }
                    Scope::Cluster => Api::all_with(client.clone(), &ar),
                };
                let pp = PatchParams::apply("volcano-rs-tests").validation_strict();
                api.patch(&name, &pp, &Patch::Apply(&value))
                    .await
                    .unwrap_or_else(|e| panic!("{}: {} {name}: {e}", path.display(), gvk.kind));
            }
        }
    }

    /// A kubeconfig file for a token of the ServiceAccount `namespace/name` (which must
    /// exist), valid for an hour: a client that has only the ServiceAccount's rights.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let sas: Api<ServiceAccount> = Api::namespaced(self.client().await, namespace);
        let tr = TokenRequest {
            spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
            ..Default::default()
        };
        let token = sas
            .create_token_request(name, &PostParams::default(), &tr)
            .await
            .unwrap_or_else(|e| panic!("a token for the ServiceAccount {namespace}/{name}: {e}"))
            .status
            .expect("a token")
            .token;
        let path = self.dir.join(format!("{namespace}-{name}.kubeconfig"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {}\n    \
                 insecure-skip-tls-verify: true\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: \
                 envtest\n  context:\n    cluster: envtest\n    user: sa\ncurrent-context: envtest\n",
                self.url
            ),
        )
        .expect("kubeconfig written");
        path
    }

    /// Creates a namespace.
    pub async fn namespace(&self, name: &str) {
        let api: Api<Namespace> = Api::all(self.client().await);
        let ns = Namespace {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("namespace {name}: {e}"),
        }
    }
}

/// What [`ApiServer::memory`] read: (resident, peak resident) in MiB per process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// etcd.
    pub etcd: Option<(u64, u64)>,
    /// kube-apiserver.
    pub apiserver: Option<(u64, u64)>,
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let one =
            |m: Option<(u64, u64)>| m.map_or("?".to_string(), |(rss, peak)| format!("{rss} MiB (peak {peak} MiB)"));
        write!(f, "etcd {}, kube-apiserver {}", one(self.etcd), one(self.apiserver))
    }
}

/// `VmRSS` and `VmHWM` of a process in MiB.
fn process_memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |field: &str| {
        status.lines().find_map(|l| l.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
    };
    Some((kib("VmRSS:")? / 1024, kib("VmHWM:")? / 1024))
}

/// Polls `f` every 50 ms until it returns `Some`, failing the test after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
