//! deploy/webhook.yaml runs `volcano-rs webhook` as its flags and RBAC expect: the
//! Deployment's arguments parse and validate, the Service is the one the registered
//! configurations name (port 443 to the container's port), and the RBAC names the
//! configurations and the Secret the webhook writes.

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use serde_json::Value;
use volcano_webhook::run::{configuration_name, WebhookOptions};
use volcano_webhook::Endpoint;

fn documents() -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/webhook.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|de| serde::Deserialize::deserialize(de).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn one<T: serde::de::DeserializeOwned>(docs: &[Value], kind: &str) -> T {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in deploy/webhook.yaml");
    serde_json::from_value(found[0].clone()).unwrap()
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    opts: WebhookOptions,
}

#[test]
fn the_deployment_service_and_rbac_agree_with_the_webhook() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap();
    assert_eq!(args[0], "webhook");
    let opts =
        Cli::try_parse_from(std::iter::once("volcano-rs".to_string()).chain(args.into_iter().skip(1))).unwrap().opts;
    opts.validate().unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("volcano-rs-webhook"));
    let port = c.ports.iter().flatten().find(|p| p.name.as_deref() == Some("https")).unwrap().container_port;
    assert_eq!(i32::from(opts.port), port);

    let svc: Service = one(&docs, "Service");
    assert_eq!(svc.metadata.name.as_deref(), Some(opts.webhook_service_name.as_str()));
    assert_eq!(svc.metadata.namespace.as_deref(), Some(opts.webhook_namespace.as_str()));
    let p = &svc.spec.unwrap().ports.unwrap()[0];
    assert_eq!(p.port, 443, "the configurations call port 443");

    let cr: ClusterRole = one(&docs, "ClusterRole");
    let named: Vec<String> =
        cr.rules.iter().flatten().flat_map(|r| r.resource_names.clone().unwrap_or_default()).collect();
    for e in Endpoint::ALL {
        assert!(named.iter().any(|n| n == configuration_name(e)), "the ClusterRole names {}", configuration_name(e));
    }
    let role: Role = one(&docs, "Role");
    assert_eq!(role.metadata.namespace.as_deref(), Some(opts.webhook_namespace.as_str()));
    let secret_names: Vec<String> =
        role.rules.iter().flatten().flat_map(|r| r.resource_names.clone().unwrap_or_default()).collect();
    assert_eq!(secret_names, vec![opts.certificate_secret.clone()]);
}

/// Every configuration the webhook registers is declared in deploy/webhook.yaml, so that
/// uninstalling deploy/ removes it, and declared without webhooks, so that `kubectl apply`
/// never undoes what the webhook registered at start.
#[test]
fn the_configurations_belong_to_the_install_and_stay_empty() {
    let docs = documents();
    for e in Endpoint::ALL {
        let kind = if e.mutates() { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
        let found: Vec<&Value> =
            docs.iter().filter(|d| d["kind"] == kind && d["metadata"]["name"] == configuration_name(e)).collect();
        assert_eq!(found.len(), 1, "one {kind} {} in deploy/webhook.yaml", configuration_name(e));
        assert_eq!(found[0]["apiVersion"], "admissionregistration.k8s.io/v1");
        assert!(found[0].get("webhooks").is_none(), "{}: the webhook fills in its webhooks", configuration_name(e));
    }
    let declared = docs.iter().filter(|d| d["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")));
    assert_eq!(declared.count(), Endpoint::ALL.len(), "no configuration the webhook does not register");
}
