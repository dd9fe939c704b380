//! front (skeleton).
