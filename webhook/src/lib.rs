//! volcano-webhook: the admission webhook of volcano-rs (`volcano-rs webhook`), a drop-in for
//! Volcano's `vc-webhook-manager` on the paths it serves (`/jobs/mutate`, `/jobs/validate`,
//! `/queues/mutate`, `/queues/validate`, `/podgroups/mutate`, `/podgroups/validate`).
//!
//! - [`admit`]: the decisions, without IO (AdmissionRequest + what is known of the cluster →
//!   AdmissionResponse), on the pure checks of `volcano_api::admission` and
//!   `volcano_api::validation`;
//! - [`tls`]: the serving certificate, from files or generated (a CA and a certificate for
//!   the webhook's Service, kept in a Secret so that every replica serves the same);
//! - [`serve`]: HTTPS (rustls) with one route per endpoint;
//! - [`run`]: the process: flags, the Queue watch, the webhook configurations registered with
//!   the CA bundle, then serving until SIGTERM.
//!
//! See docs/webhook.md.

pub mod admit;
pub mod run;
pub mod serve;
pub mod tls;

pub use admit::{admit, Endpoint, Facts, Settings};
