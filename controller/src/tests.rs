//! Unit tests of the decision logic.
