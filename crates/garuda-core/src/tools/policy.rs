//! Approval policy: which tool calls go to the client for permission.

use serde::{Deserialize, Serialize};

use super::ToolClass;

/// A session's approval policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Every write, every command and every memory change asks.
    #[default]
    Ask,
    /// Edits are allowed; commands ask.
    AutoEdit,
    /// Nothing asks.
    FullAuto,
}

impl Policy {
    /// The policy's name as configs and the wire spell it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Ask => "ask",
            Policy::AutoEdit => "auto-edit",
            Policy::FullAuto => "full-auto",
        }
    }
}

/// A policy name that is not one of `ask`, `auto-edit`, `full-auto`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval policy {0:?}: use ask, auto-edit or full-auto")]
pub struct UnknownPolicy(pub String);

impl std::str::FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ask" => Ok(Policy::Ask),
            "auto-edit" => Ok(Policy::AutoEdit),
            "full-auto" => Ok(Policy::FullAuto),
            other => Err(UnknownPolicy(other.to_string())),
        }
    }
}

/// True when a call of `class` must be approved by the client under `policy`.
///
/// Reads and todo changes never ask. A memory write asks only under `ask`. Client-registered
/// tools (`Other`) never go through `permission/request`: the client runs them in its own
/// `tool/call` handler, where it can ask the person itself.
pub fn needs_approval(policy: Policy, class: ToolClass) -> bool {
    match class {
        ToolClass::Read
        | ToolClass::Search
        | ToolClass::Todo
        | ToolClass::Session
        | ToolClass::Other => false,
        ToolClass::Edit | ToolClass::Memory => policy == Policy::Ask,
        ToolClass::Exec => policy != Policy::FullAuto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        use ToolClass::*;
        let cases = [
            (Policy::Ask, [false, true, true, true, false, false]),
            (Policy::AutoEdit, [false, false, true, false, false, false]),
            (Policy::FullAuto, [false, false, false, false, false, false]),
        ];
        for (p, want) in cases {
            let got = [Read, Edit, Exec, Memory, Todo, Other].map(|c| needs_approval(p, c));
            assert_eq!(got, want, "{p:?}");
        }
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&Policy::AutoEdit).unwrap(),
            "\"auto-edit\""
        );
        assert_eq!(
            serde_json::from_str::<Policy>("\"full-auto\"").unwrap(),
            Policy::FullAuto
        );
        assert_eq!(
            serde_json::from_str::<Policy>("\"ask\"").unwrap(),
            Policy::Ask
        );
    }
}
