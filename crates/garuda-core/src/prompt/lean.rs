//! The fixed part of a small window. Below [`LEAN_WINDOW`] tokens the system prompt and the
//! tool definitions would take most of the window (about 3 200 tokens of a 4 096-token
//! llama.cpp server), so the prompt aims at [`LEAN_SHARE`] of the window: the base rules in
//! their short form, then the optional parts dropped in order (build commands, tool and
//! environment lines, memory, the user's global file) until it fits; the project's
//! instructions are cut last. Pure: the same prompt and window give the same bytes, so the
//! server's prefix cache keeps working from turn to turn.

use super::{Assembled, PartKind, sha256_hex};

/// Windows under this many tokens get the lean fixed part.
pub const LEAN_WINDOW: u64 = 16_384;
/// The share of the window the lean fixed part (prompt and tools) aims at.
pub const LEAN_SHARE: f64 = 0.25;

/// How the warning of a lean prompt starts (`context/inspect` shows it).
pub const LEAN_NOTE: &str = "small window: the lean system prompt and tool set are in use";

/// True when a session at `window` tokens gets the lean fixed part.
pub fn is_lean(window: u64) -> bool {
    window < LEAN_WINDOW
}

/// The base rules of a small window ({root}: the working root).
const LEAN_BASE: &str = "\
You are Garuda, a coding agent in the user's project. The working root is {root}; relative \
paths start there.
- Look before you answer: read files, grep, or run a command; do not guess.
- Files: read_file, grep, edit_file (exact old text, read first), write_file. Commands: bash \
(already in the root). Other tools are deferred: get one with mcp_tool_search, then call it.
- If the user denies a call, do not retry it. Be brief; say what you changed and how you checked.
- A <garuda_note> comes from Garuda, not the user.";

/// The optional parts, in the order they are dropped.
const DROP_ORDER: [PartKind; 5] = [
    PartKind::McpInstructions,
    PartKind::Build,
    PartKind::Features,
    PartKind::Memory,
    PartKind::Global,
];

/// A part's name in the report of what was dropped.
fn name(kind: PartKind) -> &'static str {
    match kind {
        PartKind::Base => "base rules",
        PartKind::Agent => "agent prompt",
        PartKind::Features => "tools and environment lines",
        PartKind::Build => "build and test commands",
        PartKind::Global => "your global instructions",
        PartKind::Instructions => "project instructions",
        PartKind::Memory => "project memory",
        PartKind::McpInstructions => "MCP server instructions",
        PartKind::CacheBreaker => "cache breaker",
    }
}

/// The lean prompt: `a` with the short base rules and, while it exceeds `budget_chars`, its
/// optional parts dropped, then the project instructions cut. Returns it and what was
/// dropped or cut (also in its warnings, which `context/inspect` shows).
pub fn lean_prompt(a: &Assembled, root: &str, budget_chars: usize) -> (Assembled, Vec<String>) {
    let identity = a
        .part(PartKind::Base)
        .rsplit("\n\n")
        .next()
        .unwrap_or("")
        .to_string();
    let base = format!(
        "{}\n\n{identity}",
        LEAN_BASE.replace("{root}", &super::visible::path_line(root))
    );
    let mut parts: Vec<(PartKind, String)> = a
        .parts
        .iter()
        .map(|p| {
            let text = match p.kind {
                PartKind::Base => base.clone(),
                k => a.part(k).to_string(),
            };
            (p.kind, text)
        })
        .collect();
    let size = |ps: &[(PartKind, String)]| -> usize {
        ps.iter().map(|(_, t)| t.chars().count() + 2).sum::<usize>() + 1
    };
    let mut dropped = Vec::new();
    for kind in DROP_ORDER {
        if size(&parts) <= budget_chars {
            break;
        }
        if let Some(i) = parts.iter().position(|(k, _)| *k == kind) {
            parts.remove(i);
            dropped.push(format!("dropped: {}", name(kind)));
        }
    }
    let over = size(&parts).saturating_sub(budget_chars);
    if over > 0
        && let Some((_, text)) = parts.iter_mut().find(|(k, _)| *k == PartKind::Instructions)
    {
        let n = text.chars().count();
        let keep = n.saturating_sub(over + 120);
        let kept: String = text.chars().take(keep).collect();
        *text = format!(
            "{kept}\n[… {} characters of the project instructions left out: the window is small]",
            n - keep
        );
        dropped.push(format!(
            "cut: {} ({} characters)",
            name(PartKind::Instructions),
            n - keep
        ));
    }
    let (system, ranges) = super::join_parts(&parts);
    let mut warnings = a.warnings.clone();
    warnings.push(format!(
        "{LEAN_NOTE}{}",
        if dropped.is_empty() {
            String::new()
        } else {
            format!(" ({})", dropped.join("; "))
        }
    ));
    let mut servers = a.mcp_instructions.clone();
    if !ranges.iter().any(|p| p.kind == PartKind::McpInstructions) {
        for r in servers.iter_mut().filter(|r| r.skipped.is_none()) {
            (r.chars, r.tokens) = (0, 0);
            r.skipped = Some("dropped from the lean prompt of a small window".into());
        }
    }
    let lean = Assembled {
        sha256: sha256_hex(&system),
        system,
        sections: a.sections.clone(),
        warnings,
        parts: ranges,
        sources: a.sources.clone(),
        mcp_instructions: servers,
    };
    (lean, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{Gathered, PromptOptions, assemble};

    fn assembled() -> Assembled {
        let g = Gathered {
            root: "/w/p".into(),
            instructions: Vec::new(),
            rules: Vec::new(),
            global: None,
            global_limit: 0,
            memory: None,
            profiles: Vec::new(),
            warnings: Vec::new(),
        };
        assemble(&g, &PromptOptions::default())
    }

    #[test]
    fn the_lean_prompt_is_short_stable_and_keeps_the_identity() {
        let a = assembled();
        let (lean, dropped) = lean_prompt(&a, "/w/p", 4_000);
        assert!(lean.system.len() < a.system.len());
        assert!(lean.system.contains("The working root is /w/p"));
        assert!(lean.system.contains("This is Garuda"));
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(
            lean_prompt(&a, "/w/p", 4_000).0,
            lean,
            "same input, same bytes"
        );
        assert!(lean.warnings.iter().any(|w| w.starts_with(LEAN_NOTE)));
    }

    #[test]
    fn mcp_instructions_are_dropped_first_and_reported() {
        let g = Gathered {
            root: "/w/p".into(),
            instructions: Vec::new(),
            rules: Vec::new(),
            global: None,
            global_limit: 0,
            memory: None,
            profiles: Vec::new(),
            warnings: Vec::new(),
        };
        let opts = PromptOptions {
            mcp_instructions: vec![crate::mcp::McpInstructions {
                server: "docs".into(),
                text: "Search first. ".repeat(100),
            }],
            ..PromptOptions::default()
        };
        let a = assemble(&g, &opts);
        assert!(a.system.contains("# MCP server instructions"));
        let (lean, dropped) = lean_prompt(&a, "/w/p", 1_000);
        assert_eq!(dropped[0], "dropped: MCP server instructions");
        assert!(!lean.system.contains("<mcp_instructions"));
        let r = &lean.mcp_instructions[0];
        assert_eq!((r.chars, r.tokens), (0, 0));
        assert!(r.skipped.as_deref().unwrap().contains("small window"));
    }
}
