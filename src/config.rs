//! Configuration (skeleton).
