//! tools (skeleton).
