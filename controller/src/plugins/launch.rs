//! Launch order: an init container that holds a pod back until the pods it depends on
//! answer on a TCP port (the MPI master waits for its workers' sshd, PyTorch workers wait
//! for the master's rendezvous port).
//!
//! The container runs `sh -c` with busybox's `nc -z`, tries every 2 seconds, and exits 1
//! with a message on stderr once the timeout has passed, so that the pod fails (and the
//! job's `PodFailed` policies apply) rather than waiting forever.

use k8s_openapi::api::core::v1::Container;

/// The default image of the wait containers (the busybox Volcano's PyTorch plugin uses).
pub const DEFAULT_IMAGE: &str = "busybox:1.36.1";
/// The default timeout, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 300;
/// Seconds between two tries.
pub const STEP_SECONDS: i32 = 2;

/// The shell script that waits until every host answers on `port`, at most
/// `timeout_seconds` in all, and exits non-zero when the time is up.
pub fn wait_script(hosts: &[String], port: i32, timeout_seconds: i32) -> String {
    let hosts = hosts.join(" ");
    format!(
        "deadline=$(($(date +%s) + {timeout_seconds}))\n\
         for host in {hosts}; do\n\
         \x20 until nc -z -w {STEP_SECONDS} \"$host\" {port}; do\n\
         \x20   if [ \"$(date +%s)\" -ge \"$deadline\" ]; then\n\
         \x20     echo \"timed out after {timeout_seconds}s waiting for $host:{port}\" >&2\n\
         \x20     exit 1\n\
         \x20   fi\n\
         \x20   echo \"waiting for $host:{port}\"\n\
         \x20   sleep {STEP_SECONDS}\n\
         \x20 done\n\
         done\n"
    )
}

/// The wait init container `name` running [`wait_script`] in `image`.
pub fn wait_container(name: &str, image: &str, hosts: &[String], port: i32, timeout_seconds: i32) -> Container {
    Container {
        name: name.to_string(),
        image: Some(image.to_string()),
        command: Some(vec!["sh".into(), "-c".into(), wait_script(hosts, port, timeout_seconds)]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_waits_for_every_host_and_fails_on_timeout() {
        let s = wait_script(&["a.j".into(), "b.j".into()], 22, 60);
        assert!(s.contains("for host in a.j b.j; do"), "{s}");
        assert!(s.contains("until nc -z -w 2 \"$host\" 22; do"), "{s}");
        assert!(s.contains("exit 1"), "{s}");
    }

    /// Runs the script where `sh` and `date` exist, against a closed loopback port with a
    /// `nc` stand-in that always fails: it must give up after the timeout with status 1.
    #[test]
    fn the_script_exits_non_zero_when_time_is_up() {
        let dir = std::env::temp_dir().join(format!("volcano-rs-wait-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let nc = dir.join("nc");
        std::fs::write(&nc, "#!/bin/sh\nexit 1\n").unwrap();
        std::process::Command::new("chmod").arg("+x").arg(&nc).status().unwrap();
        let script = wait_script(&["127.0.0.1".into()], 9, 0).replace("sleep 2", "sleep 0");
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
        let out = std::process::Command::new("sh").arg("-c").arg(&script).env("PATH", path).output().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 0s waiting for 127.0.0.1:9"));
    }
}
