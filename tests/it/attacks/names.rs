//! Attacks: names.
