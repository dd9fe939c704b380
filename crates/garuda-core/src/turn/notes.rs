//! What a live session has told the model about its instruction files, as plain state: the
//! latest note about the root files, and the nested files and rules it attached. A leaf: the
//! state holds these, and the files that keep them up (`instructions`, `scoped`) add their
//! behaviour, so the state need not import them.

use std::collections::{BTreeMap, BTreeSet};

use crate::prompt::changes::InstructionText;
use crate::prompt::nested::{InForce, Touched};

/// The latest note about the instruction files: the text it put in force and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootNoted {
    /// The text the note carries.
    pub text: InstructionText,
    /// The note message.
    pub message_id: String,
}

/// A source the model has: its version and the note message that carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The version sent.
    pub version: String,
    /// The note message holding its text.
    pub message_id: String,
}

/// The session's nested instructions and rules.
#[derive(Debug, Clone, Default)]
pub struct ScopeState {
    /// Paths the session's tools worked in (the whole session, compactions included).
    pub touched: Touched,
    /// What the model has in its view, by path.
    pub attached: BTreeMap<String, Attached>,
    /// In force but left out of a re-attachment for room: sent again when touched again.
    pub evicted: BTreeSet<String>,
    /// What was in force when last computed.
    pub in_force: InForce,
    /// The workspace generation `in_force` was computed at.
    pub(super) generation: Option<u64>,
    /// Something changed since (a touch, an eviction lifted).
    pub(super) dirty: bool,
    /// Notes may have left the view (a load, a snip, a collapse): check before the next note.
    pub(super) check_view: bool,
}
