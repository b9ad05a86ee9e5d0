//! volcano-controller
