//! The replays' errors: what a user can fix (a trace that cannot be read, a malformed row,
//! an output that cannot be written) and what is a bug (the scheduler broke an invariant).

use std::path::PathBuf;

/// An error of a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A row of a trace does not have the trace's schema: the file, its line (from 1, the
    /// header is line 1), the column and what was expected.
    #[error("{}:{line}: column {column}: {message}", path.display())]
    Row {
        /// The file (for a member of an archive: `archive.tar.gz:member.csv`).
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The column's name in the header (or its number when the header has none).
        column: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A trace as a whole is unusable: an unknown trace name, a missing column, no jobs.
    #[error("{0}")]
    Trace(String),
    /// An output could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A chart could not be drawn.
    #[error("cannot draw {}: {message}", path.display())]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
    /// The simulated cluster refused something (a scheduler configuration or object the
    /// simulator rejects), or the scheduler broke an invariant ([`ReplayError::is_scheduler_bug`]).
    #[error(transparent)]
    Sim(#[from] volcano_sim::SimError),
}

impl ReplayError {
    /// A bounded label for the error's kind (logs, metrics).
    pub fn category(&self) -> &'static str {
        match self {
            ReplayError::Read { .. } => "read",
            ReplayError::Row { .. } => "row",
            ReplayError::Trace(_) => "trace",
            ReplayError::Write { .. } => "write",
            ReplayError::Plot { .. } => "plot",
            ReplayError::Sim(e) => e.category(),
        }
    }

    /// Whether the error is the scheduler's fault (an invariant broken, an effect the
    /// cluster cannot apply), not the input's.
    pub fn is_scheduler_bug(&self) -> bool {
        matches!(self, ReplayError::Sim(e) if e.is_scheduler_bug())
    }
}
