//! deploy/volcano-rs-controller.yaml against the controller: its Deployment's arguments parse and
//! validate with the controller's own command line (the real-API-server test runs the
//! controller with the manifest's ServiceAccount and RBAC).

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
    for de in serde_yaml_ng::Deserializer::from_str(&text) {
        let doc: serde_json::Value = serde::Deserialize::deserialize(de).unwrap();
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
    }
    assert!(found, "a Deployment");
}
