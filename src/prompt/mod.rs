//! prompt (skeleton).
