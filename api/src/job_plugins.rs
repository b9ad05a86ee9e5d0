//! The job plugins' arguments (`spec.plugins`), checked once for both the admission webhook
//! and the job controller: every flag of every plugin with the type of its value, the role
//! tasks that must exist, the flags that go together.
//!
//! [`check`] is what the webhook refuses a job for ([`crate::admission::validate_job_create`])
//! and the first thing the controller's `JobPlugins::from_job` does, so a job the planner
//! would refuse is refused at admission with the same reason. [`parse`] reads one plugin's
//! arguments (Go `flag` syntax, as Volcano reads them: `--port=2222`, `-port 2222`, `--flag`
//! for a boolean) after the same checks; the controller's plugins read their values from
//! the [`Args`] it returns.
//!
//! Volcano logs a malformed argument and goes on with the default; volcano-rs refuses the job
//! instead (STYLE.md §3.3).

use std::collections::BTreeMap;

use thiserror::Error;

use crate::job::Job;

/// The order in which the enabled plugins mutate a pod and add their objects (Volcano walks
/// a Go map, whose order is random).
pub const ORDER: [&str; 7] = ["env", "svc", "ssh", "tensorflow", "pytorch", "mxnet", "mpi"];

/// Job plugins that Volcano has and volcano-rs does not implement yet.
pub const NOT_IMPLEMENTED: [&str; 2] = ["ray", "hcclrank"];

/// A job whose plugins cannot be planned.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PluginError {
    /// A plugin name volcano-rs does not know.
    #[error("job {job}: unknown job plugin {plugin:?}")]
    UnknownPlugin {
        /// The job, `namespace/name`.
        job: String,
        /// The plugin.
        plugin: String,
    },
    /// A plugin of Volcano's that volcano-rs does not implement ([`NOT_IMPLEMENTED`]).
    #[error("job {job}: job plugin {plugin:?} is not implemented by volcano-rs")]
    NotImplemented {
        /// The job, `namespace/name`.
        job: String,
        /// The plugin.
        plugin: String,
    },
    /// An argument the plugin does not have, or one that is not a flag.
    #[error("job {job}: plugin {plugin}: unknown argument {argument:?}")]
    UnknownArgument {
        /// The job, `namespace/name`.
        job: String,
        /// The plugin.
        plugin: String,
        /// The argument as written.
        argument: String,
    },
    /// A known argument with a value of the wrong shape.
    #[error("job {job}: plugin {plugin}: argument {argument:?}: {reason}")]
    BadArgument {
        /// The job, `namespace/name`.
        job: String,
        /// The plugin.
        plugin: String,
        /// The argument as written.
        argument: String,
        /// What was expected.
        reason: String,
    },
    /// The job does not fit the plugin (a role task missing, no ssh key given).
    #[error("job {job}: plugin {plugin}: {message}")]
    Job {
        /// The job, `namespace/name`.
        job: String,
        /// The plugin.
        plugin: String,
        /// What is wrong.
        message: String,
    },
}

impl PluginError {
    /// A bounded label for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            PluginError::UnknownPlugin { .. } => "unknown_plugin",
            PluginError::NotImplemented { .. } => "not_implemented",
            PluginError::UnknownArgument { .. } => "unknown_argument",
            PluginError::BadArgument { .. } => "bad_argument",
            PluginError::Job { .. } => "job",
        }
    }

    /// The plugin concerned.
    pub fn plugin(&self) -> &str {
        match self {
            PluginError::UnknownPlugin { plugin, .. }
            | PluginError::NotImplemented { plugin, .. }
            | PluginError::UnknownArgument { plugin, .. }
            | PluginError::BadArgument { plugin, .. }
            | PluginError::Job { plugin, .. } => plugin,
        }
    }

    /// What is wrong, without the job's name (the webhook names the job once).
    pub fn detail(&self) -> String {
        match self {
            PluginError::UnknownPlugin { plugin, .. } => format!("unknown job plugin {plugin:?}"),
            PluginError::NotImplemented { plugin, .. } => {
                format!("job plugin {plugin:?} is not implemented by volcano-rs")
            }
            PluginError::UnknownArgument { argument, .. } => format!("unknown argument {argument:?}"),
            PluginError::BadArgument { argument, reason, .. } => format!("argument {argument:?}: {reason}"),
            PluginError::Job { message, .. } => message.clone(),
        }
    }
}

/// `namespace/name` of a job, for errors.
pub fn job_key(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The type of a flag's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagType {
    /// Any text.
    Text,
    /// A boolean (`--flag`, `--flag=false`; Go's `strconv.ParseBool` spellings).
    Bool,
    /// A TCP port, 1..=65535.
    Port,
    /// An integer ≥ 1.
    Positive,
}

/// A role flag whose task must be a task of the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    /// The flag (`master`).
    pub flag: &'static str,
    /// The task name when the flag is not given.
    pub default: &'static str,
    /// The role, for the message (`master`).
    pub role: &'static str,
}

/// What one plugin accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginSpec {
    /// The plugin's name (its `spec.plugins` key).
    pub name: &'static str,
    /// Its flags.
    pub flags: &'static [(&'static str, FlagType)],
    /// The role flags whose tasks must exist.
    pub roles: &'static [Role],
    /// Flags given both or neither.
    pub paired: &'static [(&'static str, &'static str)],
}

/// `env`: no arguments.
pub const ENV: PluginSpec = PluginSpec { name: "env", flags: &[], roles: &[], paired: &[] };
/// `svc`.
pub const SVC: PluginSpec = PluginSpec {
    name: "svc",
    flags: &[
        ("publish-not-ready-addresses", FlagType::Bool),
        ("disable-network-policy", FlagType::Bool),
        ("inject-hosts-env", FlagType::Bool),
    ],
    roles: &[],
    paired: &[],
};
/// `ssh`.
pub const SSH: PluginSpec = PluginSpec {
    name: "ssh",
    flags: &[
        ("ssh-key-file-path", FlagType::Text),
        ("ssh-private-key", FlagType::Text),
        ("ssh-public-key", FlagType::Text),
        ("ssh-port", FlagType::Port),
    ],
    roles: &[],
    paired: &[("ssh-private-key", "ssh-public-key")],
};
/// `tensorflow`.
pub const TENSORFLOW: PluginSpec = PluginSpec {
    name: "tensorflow",
    flags: &[
        ("ps", FlagType::Text),
        ("worker", FlagType::Text),
        ("chief", FlagType::Text),
        ("evaluator", FlagType::Text),
        ("port", FlagType::Port),
    ],
    roles: &[],
    paired: &[],
};
/// `pytorch`.
pub const PYTORCH: PluginSpec = PluginSpec {
    name: "pytorch",
    flags: &[
        ("master", FlagType::Text),
        ("worker", FlagType::Text),
        ("port", FlagType::Port),
        ("wait-master-enabled", FlagType::Bool),
        ("wait-master-timeout", FlagType::Positive),
        ("wait-master-image", FlagType::Text),
        ("nproc-per-node", FlagType::Positive),
    ],
    roles: &[Role { flag: "master", default: "master", role: "master" }],
    paired: &[],
};
/// `mxnet` (volcano-rs's own).
pub const MXNET: PluginSpec = PluginSpec {
    name: "mxnet",
    flags: &[
        ("scheduler", FlagType::Text),
        ("server", FlagType::Text),
        ("worker", FlagType::Text),
        ("port", FlagType::Port),
    ],
    roles: &[Role { flag: "scheduler", default: "scheduler", role: "scheduler" }],
    paired: &[],
};
/// `mpi`.
pub const MPI: PluginSpec = PluginSpec {
    name: "mpi",
    flags: &[
        ("master", FlagType::Text),
        ("worker", FlagType::Text),
        ("port", FlagType::Port),
        ("slots", FlagType::Positive),
        ("wait-workers-enabled", FlagType::Bool),
        ("wait-workers-timeout", FlagType::Positive),
        ("wait-workers-image", FlagType::Text),
    ],
    roles: &[
        Role { flag: "master", default: "master", role: "master" },
        Role { flag: "worker", default: "worker", role: "worker" },
    ],
    paired: &[],
};

/// Every plugin volcano-rs implements, in [`ORDER`].
pub const SPECS: [PluginSpec; 7] = [ENV, SVC, SSH, TENSORFLOW, PYTORCH, MXNET, MPI];

/// The spec of plugin `name`.
pub fn spec(name: &str) -> Option<&'static PluginSpec> {
    SPECS.iter().find(|s| s.name == name)
}

/// A plugin's arguments, parsed: flag name → (the argument as written, its value), the last
/// one winning as with Go's `flag`.
#[derive(Debug)]
pub struct Args<'a> {
    job: &'a Job,
    plugin: &'static str,
    values: BTreeMap<&'static str, (String, String)>,
}

impl<'a> Args<'a> {
    /// Splits `args` against the plugin's flags: an unknown flag or a value flag without its
    /// value is an error; the values are not checked (that is [`parse`]).
    fn split(job: &'a Job, spec: &PluginSpec, args: &[String]) -> Result<Self, PluginError> {
        let plugin = spec.name;
        let unknown = |a: &str| PluginError::UnknownArgument {
            job: job_key(job),
            plugin: plugin.to_string(),
            argument: a.to_string(),
        };
        let mut values = BTreeMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let flag = a.strip_prefix("--").or_else(|| a.strip_prefix('-')).ok_or_else(|| unknown(a))?;
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            let &(name, ty) = spec.flags.iter().find(|(n, _)| *n == name).ok_or_else(|| unknown(a))?;
            let value = match (ty, inline) {
                (_, Some(v)) => v.to_string(),
                (FlagType::Bool, None) => "true".to_string(),
                (_, None) => it.next().cloned().ok_or_else(|| PluginError::BadArgument {
                    job: job_key(job),
                    plugin: plugin.to_string(),
                    argument: a.clone(),
                    reason: "expected a value (--name=value)".to_string(),
                })?,
            };
            values.insert(name, (a.clone(), value));
        }
        Ok(Args { job, plugin, values })
    }

    fn bad(&self, argument: &str, reason: impl Into<String>) -> PluginError {
        PluginError::BadArgument {
            job: job_key(self.job),
            plugin: self.plugin.to_string(),
            argument: argument.to_string(),
            reason: reason.into(),
        }
    }

    /// A string flag, or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.values.get(name).map_or_else(|| default.to_string(), |(_, v)| v.clone())
    }

    /// A string flag, if given.
    pub fn opt_string(&self, name: &str) -> Option<String> {
        self.values.get(name).map(|(_, v)| v.clone())
    }

    /// A TCP port (1..=65535), or `default`.
    pub fn port(&self, name: &str, default: i32) -> Result<i32, PluginError> {
        match self.values.get(name) {
            None => Ok(default),
            Some((a, v)) => match v.parse::<i32>() {
                Ok(p) if (1..=65535).contains(&p) => Ok(p),
                _ => Err(self.bad(a, format!("{v:?} is not a port (1..65535)"))),
            },
        }
    }

    /// A positive integer, if given.
    pub fn opt_positive(&self, name: &str) -> Result<Option<i32>, PluginError> {
        match self.values.get(name) {
            None => Ok(None),
            Some((a, v)) => match v.parse::<i32>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(self.bad(a, format!("{v:?} is not a positive integer"))),
            },
        }
    }

    /// A boolean flag (Go's `strconv.ParseBool` spellings), or `default`.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, PluginError> {
        match self.values.get(name) {
            None => Ok(default),
            Some((a, v)) => match v.as_str() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
                "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
                _ => Err(self.bad(a, format!("{v:?} is not a boolean"))),
            },
        }
    }

    /// The task name given to a role flag, or `default`.
    pub fn task(&self, name: &str, default: &str) -> String {
        self.string(name, default)
    }
}

/// Plugin `spec`'s arguments `args` for `job`, checked: known flags, values of their type,
/// role tasks that exist, paired flags given together.
pub fn parse<'a>(job: &'a Job, spec: &PluginSpec, args: &[String]) -> Result<Args<'a>, PluginError> {
    let a = Args::split(job, spec, args)?;
    for &(name, ty) in spec.flags {
        match ty {
            FlagType::Text => {}
            FlagType::Bool => {
                a.bool(name, false)?;
            }
            FlagType::Port => {
                a.port(name, 1)?;
            }
            FlagType::Positive => {
                a.opt_positive(name)?;
            }
        }
    }
    for r in spec.roles {
        let task = a.task(r.flag, r.default);
        if !job.spec.tasks.iter().any(|t| t.name() == task) {
            return Err(PluginError::Job {
                job: job_key(job),
                plugin: spec.name.to_string(),
                message: format!("no {} task {task:?} (--{})", r.role, r.flag),
            });
        }
    }
    for (x, y) in spec.paired {
        if a.opt_string(x).is_some() != a.opt_string(y).is_some() {
            return Err(PluginError::Job {
                job: job_key(job),
                plugin: spec.name.to_string(),
                message: format!("--{x} and --{y} go together"),
            });
        }
    }
    Ok(a)
}

/// Every plugin of `job` checked ([`parse`]) in [`ORDER`], after the plugin names: the first
/// problem.
pub fn check(job: &Job) -> Result<(), PluginError> {
    for name in job.spec.plugins.keys() {
        if NOT_IMPLEMENTED.contains(&name.as_str()) {
            return Err(PluginError::NotImplemented { job: job_key(job), plugin: name.clone() });
        }
        if spec(name).is_none() {
            return Err(PluginError::UnknownPlugin { job: job_key(job), plugin: name.clone() });
        }
    }
    for s in &SPECS {
        if let Some(args) = job.spec.plugins.get(s.name) {
            parse(job, s, args)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(plugins: &[(&str, &[&str])]) -> Job {
        let mut j: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "ml"},
            "spec": {"tasks": [
                {"name": "master", "replicas": 1, "template": {}},
                {"name": "worker", "replicas": 2, "template": {}}
            ]}
        }))
        .unwrap();
        for (p, args) in plugins {
            j.spec.plugins.insert(p.to_string(), args.iter().map(|a| a.to_string()).collect());
        }
        j
    }

    #[test]
    fn flags_values_roles_and_pairs_are_checked() {
        assert!(
            check(&job(&[("mpi", &["--slots=2", "-port", "2222"]), ("svc", &["--inject-hosts-env=false"])])).is_ok()
        );
        let e = check(&job(&[("mpi", &["--worker=slave"])])).unwrap_err();
        assert_eq!(e.to_string(), "job ml/j: plugin mpi: no worker task \"slave\" (--worker)");
        assert_eq!((e.plugin(), e.detail().as_str()), ("mpi", "no worker task \"slave\" (--worker)"));
        let e = check(&job(&[("pytorch", &["--nproc-per-node=0"])])).unwrap_err();
        assert_eq!(e.category(), "bad_argument");
        assert!(e.to_string().contains("\"0\" is not a positive integer"), "{e}");
        let e = check(&job(&[("svc", &["--bogus"])])).unwrap_err();
        assert_eq!(e.category(), "unknown_argument");
        let e = check(&job(&[("ssh", &["--ssh-private-key=x"])])).unwrap_err();
        assert_eq!(e.detail(), "--ssh-private-key and --ssh-public-key go together");
        let e = check(&job(&[("tensorflow", &["--port"])])).unwrap_err();
        assert!(e.to_string().contains("expected a value"), "{e}");
        assert_eq!(check(&job(&[("ray", &[])])).unwrap_err().category(), "not_implemented");
        assert_eq!(check(&job(&[("nope", &[])])).unwrap_err().category(), "unknown_plugin");
        let e = check(&job(&[("mxnet", &[])])).unwrap_err();
        assert_eq!(e.detail(), "no scheduler task \"scheduler\" (--scheduler)");
    }

    #[test]
    fn every_implemented_plugin_has_a_spec_in_order() {
        assert_eq!(SPECS.iter().map(|s| s.name).collect::<Vec<_>>(), ORDER.to_vec());
        for s in &SPECS {
            assert!(crate::job::JOB_PLUGINS.contains(&s.name), "{}", s.name);
        }
    }
}
