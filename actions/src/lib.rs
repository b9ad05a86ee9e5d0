//! volcano-actions
