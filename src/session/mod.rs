//! session (skeleton).
