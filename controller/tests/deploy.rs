//! deploy/volcano-rs-controller.yaml against the controller: its Deployment's arguments parse and
//! validate with the controller's own command line, its ports and the metrics Service are
//! the ones the flags give (the real-API-server test runs the controller with the manifest's
//! ServiceAccount and RBAC).

use clap::Parser;
use volcano_controller::ControllerOptions;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    opts: ControllerOptions,
}

#[test]
fn the_deployment_arguments_are_the_controller_flags() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/volcano-rs-controller.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut found = false;
    let mut metrics_service = false;
    for de in serde_yaml_ng::Deserializer::from_str(&text) {
        let doc: serde_json::Value = serde::Deserialize::deserialize(de).unwrap();
        if doc["kind"] == "Service" {
            // The metrics Service selects the controller's pods and targets the metrics port.
            assert_eq!(doc["metadata"]["name"], "volcano-rs-controller-metrics");
            assert_eq!(doc["spec"]["selector"]["app.kubernetes.io/name"], "volcano-rs-controller");
            assert_eq!(doc["spec"]["ports"][0]["port"], 8081);
            assert_eq!(doc["spec"]["ports"][0]["targetPort"], "metrics");
            metrics_service = true;
        }
        if doc["kind"] != "Deployment" {
            continue;
        }
        found = true;
        assert_eq!(doc["spec"]["replicas"], 2);
        let container = &doc["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<String> =
            container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        assert_eq!(args[0], "controller");
        let opts = Cli::try_parse_from(&args).unwrap().opts;
        opts.validate().unwrap();
        assert!(opts.leader_elect);
        assert_eq!(opts.leader_elect_resource_name, "volcano-rs-controller");
        // The probes use the health port.
        assert_eq!(opts.healthz().unwrap().unwrap().port(), 11252);
        assert_eq!(container["ports"][0]["containerPort"], 11252);
        // Metrics on Volcano's controller port, named for the Service.
        assert_eq!(opts.listen().unwrap().unwrap().port(), 8081);
        assert_eq!(container["ports"][1]["name"], "metrics");
        assert_eq!(container["ports"][1]["containerPort"], 8081);
    }
    assert!(found, "a Deployment");
    assert!(metrics_service, "a metrics Service");
}
