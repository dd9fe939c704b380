//! Claude Code's settings files as a source of hooks, and the shape of tool inputs its hook
//! scripts expect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::config::MatcherGroup;
use crate::fsroot::{FsError, Root};

/// The user's Claude Code settings, relative to the home folder.
pub const USER_SETTINGS: &str = ".claude/settings.json";
/// A workspace's shared and local Claude Code settings, relative to its root, in the order
/// Claude Code applies them.
pub const WORKSPACE_SETTINGS: [&str; 2] = [".claude/settings.json", ".claude/settings.local.json"];

/// The most of a settings file read: they are small, and a huge one is not settings.
const MAX_SETTINGS_BYTES: usize = 1 << 20;

/// The parts of a Claude Code settings file Garuda reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ClaudeSettings {
    /// Matcher groups by event name.
    pub hooks: BTreeMap<String, Vec<MatcherGroup>>,
    /// `disableAllHooks: true` turns every imported hook off.
    #[serde(rename = "disableAllHooks")]
    pub disable_all_hooks: bool,
}

/// Parses a settings file's text; every other setting is ignored.
pub fn parse_settings(text: &str) -> Result<ClaudeSettings, serde_json::Error> {
    serde_json::from_str(text)
}

/// One settings file looked for, and what it held.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsFile {
    /// Where it is (absolute).
    pub path: PathBuf,
    /// Its hooks, or why it could not be used.
    pub settings: Result<ClaudeSettings, String>,
}

/// The user's `~/.claude/settings.json` (None when missing). The user's own file, so it is
/// read directly, not through a workspace root.
pub fn read_user_settings(home: &Path) -> Option<SettingsFile> {
    let path = home.join(USER_SETTINGS);
    let text = match std::fs::read(&path) {
        Ok(b) if b.len() > MAX_SETTINGS_BYTES => Err("larger than 1 MiB".to_string()),
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => Err(e.to_string()),
    };
    Some(SettingsFile {
        settings: text.and_then(|t| parse_settings(&t).map_err(|e| e.to_string())),
        path,
    })
}

/// The workspace's `.claude/settings.json` and `.claude/settings.local.json` that exist, read
/// beneath the root (a link out of it is refused like any other workspace file).
pub fn read_workspace_settings(root: &Root) -> Vec<SettingsFile> {
    WORKSPACE_SETTINGS
        .iter()
        .filter_map(|rel| {
            let text = match root.read_text(Path::new(rel), MAX_SETTINGS_BYTES) {
                Ok(r) if r.truncated => Err("larger than 1 MiB".to_string()),
                Ok(r) => Ok(r.text),
                Err(FsError::NotFound(_)) => return None,
                Err(e) => Err(e.to_string()),
            };
            Some(SettingsFile {
                path: root.path().join(rel),
                settings: text.and_then(|t| parse_settings(&t).map_err(|e| e.to_string())),
            })
        })
        .collect()
}

/// A Garuda tool input as Claude Code's scripts expect it: file tools also carry
/// `file_path`, absolute (Claude Code's field), beside Garuda's root-relative `path`.
pub fn claude_tool_input(tool: &str, input: &Value, root: &Path) -> Value {
    let mut out = input.clone();
    if let Some(field) = crate::tools::claude_file_path_field(tool)
        && let Some(obj) = out.as_object_mut()
        && !obj.contains_key("file_path")
        && let Some(p) = obj.get(field).and_then(Value::as_str)
    {
        let abs = root.join(p);
        obj.insert("file_path".into(), Value::String(abs.display().to_string()));
    }
    out
}

/// An `updatedInput` from a hook written for Claude Code, back in Garuda's shape: a
/// `file_path` becomes `path` (root-relative when it is under the root).
pub fn garuda_tool_input(tool: &str, updated: &Value, root: &Path) -> Value {
    let mut out = updated.clone();
    if let Some(field) = crate::tools::claude_file_path_field(tool)
        && let Some(obj) = out.as_object_mut()
        && let Some(Value::String(fp)) = obj.remove("file_path")
    {
        let p = Path::new(&fp);
        let rel = p.strip_prefix(root).unwrap_or(p);
        obj.insert(field.into(), Value::String(rel.display().to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_settings_example_parses() {
        let s = parse_settings(include_str!("fixtures/claude-settings.json")).unwrap();
        assert!(!s.disable_all_hooks);
        let pre = &s.hooks["PreToolUse"];
        assert_eq!(pre[0].matcher.as_deref(), Some("Bash"));
        assert_eq!(pre[0].hooks[0].kind.as_deref(), Some("command"));
        assert!(pre[0].hooks[0].command.as_deref().unwrap().contains("jq"));
        assert_eq!(
            s.hooks["PostToolUse"][0].matcher.as_deref(),
            Some("Edit|MultiEdit|Write")
        );
        assert_eq!(s.hooks["PostToolUse"][0].hooks[0].timeout, Some(30.0));
        assert!(s.hooks.contains_key("UserPromptSubmit"));
        assert_eq!(
            s.hooks["SessionStart"][0].matcher.as_deref(),
            Some("compact")
        );
        assert_eq!(s.hooks["Stop"][0].hooks[0].kind.as_deref(), Some("prompt"));
        assert!(
            parse_settings("{\"model\": \"x\"}")
                .unwrap()
                .hooks
                .is_empty()
        );
        assert!(parse_settings("{\"hooks\": []}").is_err());
    }

    #[test]
    fn file_paths_cross_in_both_directions() {
        let root = Path::new("/w");
        let input = serde_json::json!({"path": "src/a.rs", "old_string": "a"});
        let c = claude_tool_input("edit_file", &input, root);
        assert_eq!(c["file_path"], "/w/src/a.rs");
        assert_eq!(c["path"], "src/a.rs");
        assert_eq!(
            claude_tool_input("bash", &serde_json::json!({"command": "ls"}), root).get("file_path"),
            None
        );
        let back = garuda_tool_input(
            "write_file",
            &serde_json::json!({"file_path": "/w/b.rs", "content": "x"}),
            root,
        );
        assert_eq!(back, serde_json::json!({"path": "b.rs", "content": "x"}));
        let outside = garuda_tool_input(
            "read_file",
            &serde_json::json!({"file_path": "/etc/x"}),
            root,
        );
        assert_eq!(outside["path"], "/etc/x", "left for the tool to refuse");
    }

    #[test]
    fn workspace_files_are_read_beneath_the_root() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::write(d.path().join("outside.json"), "{\"hooks\": {}}").unwrap();
        std::fs::write(
            ws.join(".claude/settings.json"),
            "{\"hooks\": {\"Stop\": []}}",
        )
        .unwrap();
        std::os::unix::fs::symlink(
            d.path().join("outside.json"),
            ws.join(".claude/settings.local.json"),
        )
        .unwrap();
        let root = Root::open(&ws).unwrap();
        let files = read_workspace_settings(&root);
        assert_eq!(files.len(), 2);
        assert!(
            files[0]
                .settings
                .as_ref()
                .unwrap()
                .hooks
                .contains_key("Stop")
        );
        let e = files[1].settings.as_ref().unwrap_err();
        assert!(e.contains("outside"), "{e}");
        assert!(read_user_settings(&d.path().join("nohome")).is_none());
    }
}
