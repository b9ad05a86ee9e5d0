//! Volcano's job admission webhooks as pure functions (work in progress).
