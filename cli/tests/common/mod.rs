//! What the command-line tests share: running the built binary from the workspace root.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The workspace root (the examples' paths are relative to it).
#[allow(dead_code)] // Each test file compiles this module; not all of them read files.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Runs `volcano-rs` with these arguments from the workspace root, without `RUST_LOG`.
pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volcano-rs"))
        .args(args)
        .current_dir(root())
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs")
}

/// A run's standard error, as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
