//! volcano-replay: public cluster traces replayed through the real scheduling core — what
//! `volcano-rs replay` runs (docs/replay.md).
//!
//! - [`openb`]: Alibaba's GPU trace under the FGD paper's protocol (one-pass placement of
//!   GPU-sharing pods; the allocation ratio as the cluster fills).
#![deny(missing_docs)]

pub mod openb;
