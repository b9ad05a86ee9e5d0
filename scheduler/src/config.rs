//! The scheduler configuration as the scheduler reads it.
//!
//! `--scheduler-conf FILE` names Volcano's configuration file (`volcano-scheduler.conf`) or the
//! ConfigMap that holds it; without it the built-in default configuration is used, as in
//! Volcano. A configuration is validated whole (names, arguments, conflicts) before it is
//! used. [`ProfileHolder::reload`] re-reads the file: an unchanged file is not parsed again,
//! a valid new one replaces the profile for the next cycle, and an invalid one is reported
//! and the last good profile stays in use (Volcano keeps its last configuration too).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use volcano_framework::{Profile, ProfileError, Registries};

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read the scheduler configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file does not hold a valid configuration.
    #[error("{path}: {source}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the field.
        #[source]
        source: ProfileError,
    },
    /// The built-in configuration does not load against these registries.
    #[error("the built-in scheduler configuration: {0}")]
    Builtin(#[source] ProfileError),
}

impl ConfigError {
    /// A bounded label for logs and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            ConfigError::Read { .. } => "read",
            ConfigError::Invalid { source, .. } | ConfigError::Builtin(source) => source.category(),
        }
    }
}

/// Reads and validates a configuration file (Volcano's file or its ConfigMap).
pub fn load_profile(path: &Path, registries: &Registries) -> Result<Profile, ConfigError> {
    let text = read(path)?;
    parse(path, &text, registries)
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })
}

fn parse(path: &Path, text: &str, registries: &Registries) -> Result<Profile, ConfigError> {
    Profile::from_yaml(text, registries).map_err(|source| ConfigError::Invalid { path: path.to_path_buf(), source })
}

/// What a reload did.
#[derive(Debug)]
pub enum Reload {
    /// The file did not change (or there is no file).
    Unchanged,
    /// A new valid configuration is in use.
    Reloaded,
    /// The new configuration is not valid; the last good one stays in use.
    Rejected(ConfigError),
}

/// The profile in use, and where it comes from.
pub struct ProfileHolder {
    path: Option<PathBuf>,
    /// The text last read from the file, valid or not (a rejected text is not re-parsed
    /// until the file changes again).
    last_text: Option<String>,
    current: Arc<Profile>,
}

impl ProfileHolder {
    /// Loads the configuration from `path`, or the built-in default without one. An invalid
    /// configuration at start is an error: the scheduler does not start.
    pub fn new(path: Option<PathBuf>, registries: &Registries) -> Result<Self, ConfigError> {
        let (profile, last_text) = match &path {
            Some(p) => {
                let text = read(p)?;
                (parse(p, &text, registries)?, Some(text))
            }
            None => (Profile::builtin_default(registries).map_err(ConfigError::Builtin)?, None),
        };
        Ok(ProfileHolder { path, last_text, current: Arc::new(profile) })
    }

    /// The profile to run the next cycle with.
    pub fn current(&self) -> Arc<Profile> {
        self.current.clone()
    }

    /// Re-reads the file. A file that cannot be read or does not validate leaves the current
    /// profile in place.
    pub fn reload(&mut self, registries: &Registries) -> Reload {
        let Some(path) = &self.path else { return Reload::Unchanged };
        let text = match read(path) {
            Ok(t) => t,
            Err(e) => return Reload::Rejected(e),
        };
        if self.last_text.as_deref() == Some(text.as_str()) {
            return Reload::Unchanged;
        }
        let parsed = parse(path, &text, registries);
        self.last_text = Some(text);
        match parsed {
            Ok(profile) => {
                self.current = Arc::new(profile);
                tracing::info!(path = %path.display(), "scheduler configuration reloaded");
                Reload::Reloaded
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "scheduler configuration rejected; keeping the last good one");
                Reload::Rejected(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_builtin::registries;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("volcano-scheduler-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("volcano-scheduler.conf")
    }

    const GOOD: &str = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: gang\n";
    const OTHER: &str = "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: gang\n";

    fn actions(p: &Profile) -> Vec<&str> {
        p.actions.iter().map(|a| a.name()).collect()
    }

    #[test]
    fn without_a_file_the_builtin_default_is_used() {
        let h = ProfileHolder::new(None, &registries()).unwrap();
        assert_eq!(actions(&h.current()), ["enqueue", "allocate", "backfill"]);
    }

    #[test]
    fn a_failed_reload_keeps_the_last_good_profile() {
        let reg = registries();
        let path = temp("reload");
        std::fs::write(&path, GOOD).unwrap();
        let mut h = ProfileHolder::new(Some(path.clone()), &reg).unwrap();
        assert!(matches!(h.reload(&reg), Reload::Unchanged));

        std::fs::write(&path, "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: gangg\n").unwrap();
        match h.reload(&reg) {
            Reload::Rejected(e) => assert!(e.to_string().contains("unknown plugin \"gangg\""), "{e}"),
            r => panic!("expected a rejection, got {r:?}"),
        }
        assert_eq!(actions(&h.current()), ["enqueue", "allocate", "backfill"], "the last good profile stays");
        assert!(matches!(h.reload(&reg), Reload::Unchanged), "the same bad text is not re-parsed");

        std::fs::write(&path, OTHER).unwrap();
        assert!(matches!(h.reload(&reg), Reload::Reloaded));
        assert_eq!(actions(&h.current()), ["allocate"]);

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(h.reload(&reg), Reload::Rejected(ConfigError::Read { .. })));
        assert_eq!(actions(&h.current()), ["allocate"]);
    }

    #[test]
    fn an_invalid_file_at_start_is_an_error_naming_the_file() {
        let path = temp("invalid");
        std::fs::write(&path, "actions: \"enqueue, , allocate\"\ntiers: []\n").unwrap();
        let e = ProfileHolder::new(Some(path.clone()), &registries()).err().expect("an error");
        assert!(e.to_string().starts_with(&path.display().to_string()), "{e}");
        assert!(e.to_string().contains("entry 2"), "{e}");
        assert_eq!(e.category(), "no_actions");
    }

    #[test]
    fn the_configmap_is_read_like_the_file() {
        let path = temp("configmap");
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: volcano-scheduler-configmap}}\ndata:\n  volcano-scheduler.conf: |\n{}",
            OTHER.lines().map(|l| format!("    {l}\n")).collect::<String>()
        );
        std::fs::write(&path, cm).unwrap();
        assert_eq!(actions(&load_profile(&path, &registries()).unwrap()), ["allocate"]);
    }
}
