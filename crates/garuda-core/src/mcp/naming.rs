//! Tool names the model sees: `mcp__SERVER__TOOL`, within the providers' rules.
//!
//! Anthropic and OpenAI both accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`. A character
//! outside that set becomes `_`; a name longer than 64 characters keeps its first 55 and ends
//! with `_` and 8 hex digits of a hash of the original server and tool names. Two tools whose
//! names sanitize to the same string (`a.b` and `a_b`) are told apart the same way: in the
//! deterministic order (server name, then tool name) the first keeps the plain name and every
//! later one gets the hashed form. The exposed name is never parsed back: the hub keeps a
//! table from exposed name to (server, tool), so a server name containing `__` is harmless.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

/// Longest tool name the providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// Every MCP tool name starts with this.
pub const PREFIX: &str = "mcp__";

/// `s` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (`_` for an empty string).
pub fn sanitize(s: &str) -> String {
    if s.is_empty() {
        return "_".into();
    }
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The plain exposed name of `tool` on `server`, before collisions are resolved.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let name = format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool));
    if name.len() <= MAX_TOOL_NAME {
        name
    } else {
        hashed(&name, server, tool, 0)
    }
}

/// `name` cut to fit with a hash of the original names (and a salt for the rare clash).
fn hashed(name: &str, server: &str, tool: &str, salt: u32) -> String {
    let mut h = Sha256::new();
    h.update(server.as_bytes());
    h.update([0]);
    h.update(tool.as_bytes());
    if salt > 0 {
        h.update(salt.to_le_bytes());
    }
    let digest = h.finalize();
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    // Sanitized names are ASCII, so byte and character counts agree.
    let keep = MAX_TOOL_NAME - 1 - hex.len();
    let head = &name[..name.len().min(keep)];
    format!("{head}_{hex}")
}

/// Exposed names for `(server, tool)` pairs given in their final order: unique, valid, and
/// the same for the same input. Later pairs yield to earlier ones on a clash.
pub fn assign_names(pairs: &[(&str, &str)]) -> Vec<String> {
    let mut used = HashSet::with_capacity(pairs.len());
    let mut out = Vec::with_capacity(pairs.len());
    for (server, tool) in pairs {
        let mut name = exposed_name(server, tool);
        let mut salt = 0;
        while used.contains(&name) {
            name = hashed(&exposed_name(server, tool), server, tool, salt);
            salt += 1;
        }
        used.insert(name.clone());
        out.push(name);
    }
    out
}

/// True when `name` is a valid provider tool name.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names() {
        assert_eq!(exposed_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(
            exposed_name("everything", "get-sum"),
            "mcp__everything__get-sum"
        );
        assert_eq!(exposed_name("my.server", "a b/c"), "mcp__my_server__a_b_c");
        assert_eq!(exposed_name("s", ""), "mcp__s___");
        assert_eq!(exposed_name("ünï", "tool"), "mcp___n___tool");
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let tool = "x".repeat(100);
        let a = exposed_name("srv", &tool);
        assert_eq!(a.len(), MAX_TOOL_NAME);
        assert!(is_valid(&a));
        assert!(a.starts_with("mcp__srv__xxxx"));
        // Same input, same name; a different long tool with the same prefix differs.
        assert_eq!(a, exposed_name("srv", &tool));
        let other = format!("{}y", "x".repeat(99));
        assert_ne!(a, exposed_name("srv", &other));
    }

    #[test]
    fn collisions_go_to_the_later_pair() {
        let names = assign_names(&[("s", "a.b"), ("s", "a_b"), ("s", "c")]);
        assert_eq!(names[0], "mcp__s__a_b");
        assert_ne!(names[1], "mcp__s__a_b");
        assert!(names[1].starts_with("mcp__s__a_b_"));
        assert!(is_valid(&names[1]));
        assert_eq!(names[2], "mcp__s__c");
        assert_eq!(
            names,
            assign_names(&[("s", "a.b"), ("s", "a_b"), ("s", "c")])
        );
    }

    #[test]
    fn every_name_is_valid() {
        for (s, t) in [
            ("a", "b"),
            ("weird server!", "tool with spaces and ✓"),
            (&"s".repeat(80)[..], "t"),
            ("", ""),
        ] {
            let n = exposed_name(s, t);
            assert!(is_valid(&n), "{n}");
        }
    }
}
