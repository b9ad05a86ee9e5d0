//! The [`Action`] trait: one step of a session (`enqueue`, `allocate`, `preempt`, …).
//!
//! An action works on the [`Session`] it is given and changes the snapshot only through the
//! session's methods and [`crate::Statement`]s. Actions are found through
//! [`crate::ActionRegistry`]; `volcano-actions` holds the built-in ones.

use crate::session::Session;

/// An action of a session (`enqueue`, `allocate`, …).
pub trait Action: Send + Sync {
    /// The configuration name.
    fn name(&self) -> &'static str;
    /// Runs the action over the session.
    fn execute(&self, ssn: &mut Session);
}
