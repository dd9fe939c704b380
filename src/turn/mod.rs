//! turn (skeleton).
