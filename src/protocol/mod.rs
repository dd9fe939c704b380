//! protocol (skeleton).
