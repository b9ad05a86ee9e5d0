//! What the controller's real-API-server tests share.

use volcano_controller::ControllerOptions;

/// The controller's flags, `/metrics` and `/healthz` on `http` (one listener).
pub(crate) fn options(kubeconfig: &std::path::Path, http: &str) -> ControllerOptions {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: ControllerOptions,
    }
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    let args =
        ["--kubeconfig", &kubeconfig, "--worker-threads", "2", "--listen-address", http, "--healthz-address", http];
    Cli::try_parse_from(std::iter::once("controller").chain(args)).unwrap().opts
}
