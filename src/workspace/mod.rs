//! workspace (skeleton).
