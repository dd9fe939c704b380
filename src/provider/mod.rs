//! provider (skeleton).
