//! Attacks: git.
