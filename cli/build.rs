//! Records the git commit the binary is built from, for `volcano-rs --version`.
//!
//! The commit comes from `VOLCANO_RS_GIT_COMMIT` when it is set (a build from a source tarball,
//! or an image build that knows the commit), else from `git rev-parse HEAD` in the source tree,
//! else it is `unknown` (a tarball without `.git` and without the variable): the build never
//! fails for want of git.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=VOLCANO_RS_GIT_COMMIT");
    let commit = match std::env::var("VOLCANO_RS_GIT_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_owned(),
        _ => {
            // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch it points
            // to (a commit). Only files that exist are named: cargo reruns the script on every
            // build when a named file is missing.
            for path in
                ["HEAD", "packed-refs"].into_iter().map(str::to_owned).chain(git(&["symbolic-ref", "-q", "HEAD"]))
            {
                if let Some(file) = git(&["rev-parse", "--path-format=absolute", "--git-path", &path]) {
                    if Path::new(&file).exists() {
                        println!("cargo:rerun-if-changed={file}");
                    }
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo:rustc-env=VOLCANO_RS_GIT_COMMIT={commit}");
}
