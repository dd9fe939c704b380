//! Attacks: trust.
