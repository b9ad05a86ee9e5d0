//! The `volcano-rs webhook` process: flags (Volcano's webhook-manager's where they apply),
//! the serving certificate, a watch of the Queues, the webhook configurations registered
//! with the CA bundle, then HTTPS until SIGTERM.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use volcano_api::crd::{Queue, QUEUE_NAME_ANNOTATION};

use crate::admit::{Endpoint, Settings};
use crate::serve::{router, serve, Cluster};
use crate::tls::{service_names, Certificates, TlsError};

/// The field manager of the webhook configurations it registers.
pub const FIELD_MANAGER: &str = "volcano-rs-webhook";

/// The flags of `volcano-rs webhook`.
#[derive(clap::Args, Clone, Debug)]
pub struct WebhookOptions {
    /// kubeconfig file (in-cluster configuration when absent).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Serving certificate (PEM). With --tls-private-key-file and --ca-cert-file; when none of
    /// the three is given, a CA and certificate are generated and kept in --certificate-secret.
    #[arg(long = "tls-cert-file", value_name = "FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long = "tls-private-key-file", value_name = "FILE")]
    pub tls_private_key_file: Option<PathBuf>,
    /// The CA that signed the serving certificate (PEM): the webhook configurations' caBundle.
    #[arg(long = "ca-cert-file", value_name = "FILE")]
    pub ca_cert_file: Option<PathBuf>,
    /// The Secret (in --webhook-namespace) that keeps a generated certificate, so that every
    /// replica and restart serves the same one.
    #[arg(long = "certificate-secret", value_name = "NAME", default_value = "volcano-rs-webhook-certs")]
    pub certificate_secret: String,
    /// Address to listen on.
    #[arg(long = "listen-address", value_name = "IP", default_value = "0.0.0.0")]
    pub listen_address: String,
    /// Port to listen on.
    #[arg(long, value_name = "PORT", default_value_t = 8443)]
    pub port: u16,
    /// Namespace of the webhook's Service.
    #[arg(long = "webhook-namespace", value_name = "NAMESPACE", default_value = "volcano-system")]
    pub webhook_namespace: String,
    /// Name of the webhook's Service (port 443).
    #[arg(long = "webhook-service-name", value_name = "NAME", default_value = "volcano-rs-webhook")]
    pub webhook_service_name: String,
    /// Call the webhook at this base URL instead of through the Service (e.g.
    /// `https://127.0.0.1:8443` for a webhook outside the cluster).
    #[arg(long = "webhook-url", value_name = "URL")]
    pub webhook_url: Option<String>,
    /// The endpoints to serve and register, comma-separated (Volcano's paths); all by default.
    #[arg(long = "enabled-admission", value_name = "PATHS", value_delimiter = ',')]
    pub enabled_admission: Vec<String>,
    /// Scheduler of jobs that name none (the first one given).
    #[arg(long = "scheduler-name", value_name = "NAME", default_value = "volcano-rs")]
    pub scheduler_name: Vec<String>,
    /// Queue of jobs that name none.
    #[arg(long = "default-queue", value_name = "NAME", default_value = "default")]
    pub default_queue: String,
    /// Register (create or update) the webhook configurations at start, with the CA bundle.
    #[arg(long = "register-webhooks", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub register_webhooks: bool,
    /// How long the API server waits for an answer, in seconds (1 to 30).
    #[arg(long = "admission-timeout", value_name = "SECONDS", default_value_t = 10)]
    pub admission_timeout: i32,
}

/// Why the webhook could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A bad flag.
    #[error("--{flag}: {message}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The certificate.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The kubeconfig or in-cluster configuration cannot be used.
    #[error("cannot configure the Kubernetes client: {0}")]
    Client(#[from] volcano_kube::ClientError),
    /// A request to the API server about an object failed.
    #[error("{object}: {source}")]
    Api {
        /// The object (`Secret ns/name`, `MutatingWebhookConfiguration name`).
        object: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The certificate Secret exists but does not hold a usable certificate.
    #[error("{secret}: {problem}")]
    BadSecret {
        /// The Secret (`Secret ns/name`).
        secret: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An object this process builds does not encode (a bug).
    #[error("{what}: {source}")]
    Encode {
        /// What was being encoded.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The watch of the Queues stopped before its first list.
    #[error("queue watch: {0}")]
    QueueWatch(#[source] kube::runtime::reflector::store::WriterDropped),
    /// Serving.
    #[error("serving on {addr}: {source}")]
    Serve {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl WebhookError {
    /// A bounded label for logs and metrics, saying what the user fixes: a flag, the
    /// certificate files or Secret, the client configuration, the API server's answers
    /// (RBAC, reachability), or the listening address.
    pub fn category(&self) -> &'static str {
        match self {
            WebhookError::Flag { .. } => "flag",
            WebhookError::Tls(e) => e.category(),
            WebhookError::BadSecret { .. } => "certificate",
            WebhookError::Client(e) => e.category(),
            WebhookError::Api { .. } | WebhookError::QueueWatch(_) => "api",
            WebhookError::Encode { .. } => "internal",
            WebhookError::Serve { .. } => "serve",
        }
    }
}

impl WebhookOptions {
    /// The enabled endpoints, or a flag error naming the unknown path.
    pub fn endpoints(&self) -> Result<Vec<Endpoint>, WebhookError> {
        if self.enabled_admission.is_empty() {
            return Ok(Endpoint::ALL.to_vec());
        }
        self.enabled_admission
            .iter()
            .map(|p| {
                Endpoint::from_path(p.trim()).ok_or_else(|| WebhookError::Flag {
                    flag: "enabled-admission",
                    message: format!(
                        "unknown path {p:?}; expected some of {}",
                        Endpoint::ALL.map(|e| e.path()).join(", ")
                    ),
                })
            })
            .collect()
    }

    /// Checks the flags before anything is read or watched.
    pub fn validate(&self) -> Result<(), WebhookError> {
        self.endpoints()?;
        let files = [&self.tls_cert_file, &self.tls_private_key_file, &self.ca_cert_file];
        let given = files.iter().filter(|f| f.is_some()).count();
        if given != 0 && given != 3 {
            return Err(WebhookError::Flag {
                flag: "tls-cert-file",
                message: "--tls-cert-file, --tls-private-key-file and --ca-cert-file go together (or none, to \
                          generate a certificate)"
                    .into(),
            });
        }
        self.socket_addr()?;
        if let Some(url) = &self.webhook_url {
            if !url.starts_with("https://") {
                return Err(WebhookError::Flag {
                    flag: "webhook-url",
                    message: format!("{url:?} is not an https:// URL"),
                });
            }
        }
        if !(1..=30).contains(&self.admission_timeout) {
            return Err(WebhookError::Flag {
                flag: "admission-timeout",
                message: format!("{} is out of range; expected 1 to 30", self.admission_timeout),
            });
        }
        Ok(())
    }

    fn socket_addr(&self) -> Result<SocketAddr, WebhookError> {
        let ip: std::net::IpAddr = self.listen_address.parse().map_err(|_| WebhookError::Flag {
            flag: "listen-address",
            message: format!("{:?} is not an IP address", self.listen_address),
        })?;
        Ok(SocketAddr::new(ip, self.port))
    }

    /// The names the generated certificate is for: the URL's host, or the Service's names.
    pub fn certificate_names(&self) -> Vec<String> {
        match &self.webhook_url {
            Some(url) => {
                let host = url.trim_start_matches("https://").split(['/', '?']).next().unwrap_or_default();
                let host = match host.rsplit_once(':') {
                    Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
                    _ => host,
                };
                vec![host.trim_start_matches('[').trim_end_matches(']').to_string()]
            }
            None => service_names(&self.webhook_service_name, &self.webhook_namespace),
        }
    }

    fn settings(&self) -> Settings {
        Settings {
            default_queue: self.default_queue.clone(),
            scheduler_name: self.scheduler_name.first().cloned().unwrap_or_else(|| "volcano-rs".into()),
        }
    }
}

/// The Kubernetes client for `--kubeconfig`, or the in-cluster / default configuration.
pub async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client, WebhookError> {
    Ok(volcano_kube::client(kubeconfig.map(PathBuf::as_path)).await?)
}

/// The certificate: from the files, or the one kept in the Secret, or a new one stored
/// there (when two replicas race, the one whose create loses reads the winner's).
pub async fn certificates(opts: &WebhookOptions, client: &Client) -> Result<Certificates, WebhookError> {
    if let (Some(cert), Some(key), Some(ca)) = (&opts.tls_cert_file, &opts.tls_private_key_file, &opts.ca_cert_file) {
        return Ok(Certificates::from_files(cert, key, ca)?);
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), &opts.webhook_namespace);
    let name = &opts.certificate_secret;
    let from_secret = |s: &Secret| -> Option<Certificates> {
        let data = s.data.as_ref()?;
        let text = |k: &str| data.get(k).and_then(|b| String::from_utf8(b.0.clone()).ok());
        Some(Certificates { cert_pem: text("tls.crt")?, key_pem: text("tls.key")?, ca_pem: text("ca.crt")? })
    };
    let where_ = format!("Secret {}/{name}", opts.webhook_namespace);
    let api_error = |source| WebhookError::Api { object: where_.clone(), source };
    if let Some(s) = api.get_opt(name).await.map_err(api_error)? {
        if let Some(c) = from_secret(&s).filter(|c| c.server_config().is_ok()) {
            return Ok(c);
        }
        return Err(WebhookError::BadSecret {
            secret: where_,
            problem: "exists but has no valid tls.crt, tls.key and ca.crt",
        });
    }
    let c = Certificates::generate(&opts.certificate_names())?;
    let data: BTreeMap<String, ByteString> = [("tls.crt", &c.cert_pem), ("tls.key", &c.key_pem), ("ca.crt", &c.ca_pem)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect();
    let secret = Secret {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!("generated the serving certificate, kept in {where_}");
            Ok(c)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let s = api.get(name).await.map_err(api_error)?;
            from_secret(&s).ok_or_else(|| WebhookError::BadSecret {
                secret: where_.clone(),
                problem: "has no tls.crt, tls.key and ca.crt",
            })
        }
        Err(e) => Err(api_error(e)),
    }
}

/// The webhook configuration's name for an endpoint (Volcano's names, so that installing
/// volcano-rs over Volcano replaces them rather than doubling them).
pub fn configuration_name(e: Endpoint) -> &'static str {
    match e {
        Endpoint::JobsMutate => "volcano-admission-service-jobs-mutate",
        Endpoint::JobsValidate => "volcano-admission-service-jobs-validate",
        Endpoint::QueuesMutate => "volcano-admission-service-queues-mutate",
        Endpoint::QueuesValidate => "volcano-admission-service-queues-validate",
        Endpoint::PodGroupsMutate => "volcano-admission-service-podgroups-mutate",
        Endpoint::PodGroupsValidate => "volcano-admission-service-podgroups-validate",
        Endpoint::HyperNodesValidate => "volcano-admission-service-hypernodes-validate",
    }
}

fn rule(e: Endpoint) -> RuleWithOperations {
    let (group, version, resource, ops): (&str, &str, &str, &[&str]) = match e {
        Endpoint::JobsMutate => ("batch.volcano.sh", "v1alpha1", "jobs", &["CREATE"]),
        Endpoint::JobsValidate => ("batch.volcano.sh", "v1alpha1", "jobs", &["CREATE", "UPDATE"]),
        Endpoint::QueuesMutate => ("scheduling.volcano.sh", "v1beta1", "queues", &["CREATE"]),
        Endpoint::QueuesValidate => ("scheduling.volcano.sh", "v1beta1", "queues", &["CREATE", "UPDATE", "DELETE"]),
        Endpoint::PodGroupsMutate => ("scheduling.volcano.sh", "v1beta1", "podgroups", &["CREATE"]),
        Endpoint::PodGroupsValidate => ("scheduling.volcano.sh", "v1beta1", "podgroups", &["CREATE"]),
        Endpoint::HyperNodesValidate => ("topology.volcano.sh", "v1alpha1", "hypernodes", &["CREATE", "UPDATE"]),
    };
    RuleWithOperations {
        api_groups: Some(vec![group.into()]),
        api_versions: Some(vec![version.into()]),
        resources: Some(vec![resource.into()]),
        operations: Some(ops.iter().map(|s| s.to_string()).collect()),
        scope: None,
    }
}

/// Jobs, Queues and HyperNodes fail closed (an object the webhook did not see is refused); PodGroups
/// fail open, so that a webhook outage never stops plain pods (whose PodGroups the scheduler
/// creates) from being scheduled.
fn failure_policy(e: Endpoint) -> &'static str {
    match e {
        Endpoint::PodGroupsMutate | Endpoint::PodGroupsValidate => "Ignore",
        _ => "Fail",
    }
}

fn client_config(opts: &WebhookOptions, e: Endpoint, ca: &str) -> WebhookClientConfig {
    let ca_bundle = Some(ByteString(ca.as_bytes().to_vec()));
    match &opts.webhook_url {
        Some(url) => WebhookClientConfig {
            url: Some(format!("{}{}", url.trim_end_matches('/'), e.path())),
            ca_bundle,
            service: None,
        },
        None => WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: opts.webhook_namespace.clone(),
                name: opts.webhook_service_name.clone(),
                path: Some(e.path().into()),
                port: Some(443),
            }),
            ca_bundle,
            url: None,
        },
    }
}

/// The webhook configurations for the enabled endpoints, with the CA bundle.
pub fn configurations(
    opts: &WebhookOptions,
    ca: &str,
) -> Result<(Vec<MutatingWebhookConfiguration>, Vec<ValidatingWebhookConfiguration>), WebhookError> {
    let mut mutating = Vec::new();
    let mut validating = Vec::new();
    for e in opts.endpoints()? {
        let name = configuration_name(e);
        let metadata = ObjectMeta { name: Some(name.into()), ..Default::default() };
        let hook_name = format!("{}.volcano.sh", e.path().trim_start_matches('/').replace('/', "."));
        // The fields both kinds of webhook share, read into the kind's own type.
        let hook = serde_json::json!({
            "name": hook_name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config(opts, e, ca),
            "failurePolicy": failure_policy(e),
            "sideEffects": "None",
            "timeoutSeconds": opts.admission_timeout,
            "rules": [rule(e)],
        });
        let invalid = |source| WebhookError::Encode { what: format!("webhook {}", e.path()), source };
        if e.mutates() {
            let webhooks = Some(vec![serde_json::from_value::<MutatingWebhook>(hook).map_err(invalid)?]);
            mutating.push(MutatingWebhookConfiguration { metadata, webhooks });
        } else {
            let webhooks = Some(vec![serde_json::from_value::<ValidatingWebhook>(hook).map_err(invalid)?]);
            validating.push(ValidatingWebhookConfiguration { metadata, webhooks });
        }
    }
    Ok((mutating, validating))
}

/// Applies the webhook configurations (server-side apply, forced: they are this process's).
pub async fn register(opts: &WebhookOptions, client: &Client, ca: &str) -> Result<(), WebhookError> {
    let (mutating, validating) = configurations(opts, ca)?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    for mut c in mutating {
        let name = c.metadata.name.clone().unwrap_or_default();
        c.metadata.managed_fields = None;
        let value = apply_body(&c, "MutatingWebhookConfiguration")?;
        m.patch(&name, &params, &Patch::Apply(value))
            .await
            .map_err(|source| WebhookError::Api { object: format!("MutatingWebhookConfiguration {name}"), source })?;
    }
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for c in validating {
        let name = c.metadata.name.clone().unwrap_or_default();
        let value = apply_body(&c, "ValidatingWebhookConfiguration")?;
        v.patch(&name, &params, &Patch::Apply(value))
            .await
            .map_err(|source| WebhookError::Api { object: format!("ValidatingWebhookConfiguration {name}"), source })?;
    }
    Ok(())
}

fn apply_body<T: serde::Serialize>(obj: &T, kind: &str) -> Result<serde_json::Value, WebhookError> {
    let mut v = serde_json::to_value(obj).map_err(|source| WebhookError::Encode { what: kind.to_string(), source })?;
    v["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    v["kind"] = kind.into();
    Ok(v)
}

/// The cluster as the handlers read it: the watched queues, and namespaces read on demand.
struct LiveCluster {
    queues: Store<Queue>,
    namespaces: Api<Namespace>,
}

impl Cluster for LiveCluster {
    fn queues(&self) -> Vec<Queue> {
        self.queues.state().iter().map(|q| (**q).clone()).collect()
    }

    fn namespace_queue(&self, namespace: &str) -> BoxFuture<'static, Option<String>> {
        let api = self.namespaces.clone();
        let ns = namespace.to_string();
        Box::pin(async move {
            match tokio::time::timeout(Duration::from_secs(3), api.get_opt(&ns)).await {
                Ok(Ok(Some(n))) => n.metadata.annotations.and_then(|a| a.get(QUEUE_NAME_ANNOTATION).cloned()),
                Ok(Ok(None)) => None,
                Ok(Err(e)) => {
                    tracing::warn!(namespace = %ns, "cannot read the namespace's queue annotation: {e}");
                    None
                }
                Err(_) => {
                    tracing::warn!(namespace = %ns, "reading the namespace's queue annotation timed out");
                    None
                }
            }
        })
    }
}

/// Runs the webhook until `shutdown` completes: flags checked, certificate read or made,
/// queues watched (serving starts once they are listed), configurations registered, HTTPS.
pub async fn run(opts: WebhookOptions, shutdown: impl Future<Output = ()>) -> Result<(), WebhookError> {
    opts.validate()?;
    let endpoints = opts.endpoints()?;
    let client = client(opts.kubeconfig.as_ref()).await?;
    let certs = certificates(&opts, &client).await?;
    let tls = certs.server_config()?;

    let (store, writer) = reflector::store();
    let queues: Api<Queue> = Api::all(client.clone());
    let watch = reflector::reflector(writer, watcher(queues, watcher::Config::default()))
        .backoff(volcano_kube::WatchBackoff::new())
        .applied_objects()
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::warn!("queue watch: {e}");
            }
        });
    let watch = tokio::spawn(watch);
    store.wait_until_ready().await.map_err(WebhookError::QueueWatch)?;

    let addr = opts.socket_addr()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| WebhookError::Serve { addr: addr.to_string(), source })?;
    if opts.register_webhooks {
        register(&opts, &client, &certs.ca_pem).await?;
    }
    tracing::info!(%addr, endpoints = ?endpoints.iter().map(|e| e.path()).collect::<Vec<_>>(), "serving");
    let cluster = Arc::new(LiveCluster { queues: store, namespaces: Api::all(client.clone()) });
    let app = router(opts.settings(), cluster, &endpoints);
    let served = serve(listener, tls, app, shutdown).await;
    watch.abort();
    served.map_err(|source| WebhookError::Serve { addr: addr.to_string(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: WebhookOptions,
    }

    fn parse(args: &[&str]) -> WebhookOptions {
        Cli::try_parse_from(std::iter::once("webhook").chain(args.iter().copied())).unwrap().opts
    }

    #[test]
    fn defaults_serve_every_endpoint_through_the_service() {
        let o = parse(&[]);
        o.validate().unwrap();
        assert_eq!(o.endpoints().unwrap(), Endpoint::ALL.to_vec());
        assert_eq!(o.certificate_names()[0], "volcano-rs-webhook.volcano-system.svc");
        let (m, v) = configurations(&o, "CA").unwrap();
        assert_eq!((m.len(), v.len()), (3, 4));
        // Volcano's HyperNode webhook: its configuration name, resource and operations; it
        // fails closed, as Volcano's.
        let hn = v.iter().find(|c| c.metadata.name.as_deref() == Some("volcano-admission-service-hypernodes-validate"));
        let hn = &hn.expect("the HyperNode configuration").webhooks.as_ref().unwrap()[0];
        let rule = &hn.rules.as_ref().unwrap()[0];
        assert_eq!(rule.api_groups.as_deref(), Some(&["topology.volcano.sh".to_string()][..]));
        assert_eq!(rule.api_versions.as_deref(), Some(&["v1alpha1".to_string()][..]));
        assert_eq!(rule.resources.as_deref(), Some(&["hypernodes".to_string()][..]));
        assert_eq!(rule.operations.as_deref(), Some(&["CREATE".to_string(), "UPDATE".to_string()][..]));
        assert_eq!(hn.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(hn.client_config.service.as_ref().unwrap().path.as_deref(), Some("/hypernodes/validate"));
        let hook = &v[0].webhooks.as_ref().unwrap()[0];
        let svc = hook.client_config.service.as_ref().unwrap();
        assert_eq!(
            (svc.name.as_str(), svc.path.as_deref(), svc.port),
            ("volcano-rs-webhook", Some("/jobs/validate"), Some(443))
        );
        assert_eq!(hook.client_config.ca_bundle.as_ref().unwrap().0, b"CA");
        assert_eq!(v[0].metadata.name.as_deref(), Some("volcano-admission-service-jobs-validate"));
    }

    #[test]
    fn bad_flags_are_errors_naming_the_flag() {
        let e = parse(&["--enabled-admission", "/jobs/mutate,/pods/mutate"]).validate().unwrap_err().to_string();
        assert!(e.starts_with("--enabled-admission: unknown path \"/pods/mutate\""), "{e}");
        let e = parse(&["--tls-cert-file", "a.pem"]).validate().unwrap_err().to_string();
        assert!(e.starts_with("--tls-cert-file:"), "{e}");
        let e = parse(&["--webhook-url", "http://x"]).validate().unwrap_err().to_string();
        assert!(e.starts_with("--webhook-url:"), "{e}");
        let e = parse(&["--listen-address", "localhost"]).validate().unwrap_err().to_string();
        assert!(e.starts_with("--listen-address:"), "{e}");
        let e = parse(&["--admission-timeout", "31"]).validate().unwrap_err().to_string();
        assert!(e.starts_with("--admission-timeout:"), "{e}");
    }

    #[test]
    fn a_webhook_url_names_the_certificate_and_the_configurations() {
        let o = parse(&["--webhook-url", "https://127.0.0.1:9443/", "--enabled-admission", "/queues/validate"]);
        o.validate().unwrap();
        assert_eq!(o.certificate_names(), vec!["127.0.0.1".to_string()]);
        let (m, v) = configurations(&o, "CA").unwrap();
        assert!(m.is_empty());
        let hook = &v[0].webhooks.as_ref().unwrap()[0];
        assert_eq!(hook.client_config.url.as_deref(), Some("https://127.0.0.1:9443/queues/validate"));
        assert_eq!(hook.rules.as_ref().unwrap()[0].operations.as_ref().unwrap().len(), 3);
    }
}
