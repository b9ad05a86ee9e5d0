//! volcano-replay: public traces replayed through the real scheduling core (`volcano-rs
//! replay`).
//!
//! Where to begin:
//! - [`openb`]: Alibaba's GPU trace under the FGD paper's protocol: one session of
//!   `allocate` places the trace's GPU-sharing pods one by one; the allocation ratio as
//!   the cluster fills;
//! - [`jobs`]: job traces (Muri, Philly, ITP): each job a gang of GPUs with a submission
//!   time and a duration, replayed cycle by cycle on the simulator's in-memory cluster and
//!   virtual clock; summary, CSV files and charts;
//! - [`plot`]: line charts as SVG files, shared by the replays;
//! - [`progress`]: a progress bar that shows only on a terminal and only for long runs;
//! - [`error`]: the job replays' errors (a malformed row names its file, line and column).
//!
//! docs/replay.md describes the commands and the figures measured with them.
#![deny(missing_docs)]

pub mod error;
pub mod jobs;
pub mod openb;
pub mod plot;
pub mod progress;

pub use error::ReplayError;
