//! The `[hooks]` table of a config file: switches, and `[[hooks.EVENT]]` matcher groups in the
//! shape of Claude Code's JSON (event → matcher groups → handlers).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The default time a hook may run, in seconds (Claude Code's default too).
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// Where hooks are imported from besides Garuda's own config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportSource {
    /// The `hooks` object of Claude Code's settings files (`~/.claude/settings.json`, and the
    /// workspace's `.claude/settings.json` and `.claude/settings.local.json`).
    Claude,
}

/// `[hooks]`: e.g. `import = ["claude"]`, then `[[hooks.PreToolUse]]` tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub struct HooksSettings {
    /// Run hooks at all (off: every hook is listed as skipped).
    pub enabled: bool,
    /// Settings files of other agents whose hooks run too.
    pub import: Vec<ImportSource>,
    /// Workspaces named by hand (user config only). They cannot record which hooks were
    /// trusted, so they let nothing run; the warning says to run `garuda trust DIR`, which
    /// writes the separate trust file (see [`super::TrustList`]).
    pub trusted: Vec<PathBuf>,
    /// Seconds a hook without its own `timeout` may run.
    pub timeout: f64,
    /// Variables hooks get from the server's environment besides the commands' allow-list
    /// (`[sandbox] env` and the built-in names): for a hook's own token, which the model's
    /// commands then never see.
    pub env: Vec<String>,
    /// The trust file beside the config file this came from (set at load; never from a
    /// file).
    #[serde(skip)]
    pub trust_file: Option<PathBuf>,
    /// Matcher groups by event name, in file order; names Garuda does not know are kept so
    /// they can be reported as skipped instead of failing the whole file.
    #[serde(flatten)]
    pub events: BTreeMap<String, Vec<MatcherGroup>>,
}

impl Default for HooksSettings {
    fn default() -> Self {
        HooksSettings {
            enabled: true,
            import: Vec::new(),
            trusted: Vec::new(),
            timeout: DEFAULT_TIMEOUT_SECS,
            env: Vec::new(),
            trust_file: None,
            events: BTreeMap::new(),
        }
    }
}

/// The switches `[hooks]` knows besides event names.
const SWITCHES: &[&str] = &["enabled", "import", "trusted", "timeout", "env"];

/// By hand rather than with `#[serde(flatten)]`: flattening buffers the table, which loses the
/// line and column of errors and turns a misspelt switch into a puzzling "expected struct
/// MatcherGroup". Event names start with a capital letter (as Claude Code spells them); any
/// other unknown key is an error naming the switches.
impl<'de> Deserialize<'de> for HooksSettings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = HooksSettings;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a [hooks] table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<HooksSettings, A::Error> {
                let mut s = HooksSettings::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "enabled" => s.enabled = map.next_value()?,
                        "import" => s.import = map.next_value()?,
                        "trusted" => s.trusted = map.next_value()?,
                        "timeout" => s.timeout = map.next_value()?,
                        "env" => s.env = map.next_value()?,
                        k if k.starts_with(|c: char| c.is_ascii_uppercase()) => {
                            let groups: Vec<MatcherGroup> = map.next_value()?;
                            s.events.entry(key).or_default().extend(groups);
                        }
                        _ => {
                            let event = super::HookEvent::ALL
                                .iter()
                                .find(|e| e.name().eq_ignore_ascii_case(&key))
                                .map_or(String::new(), |e| format!(" (did you mean {e}?)"));
                            return Err(serde::de::Error::custom(format!(
                                "unknown key `{key}` in [hooks]{event}: expected one of {}, or \
                                 an event such as PreToolUse",
                                SWITCHES.join(", ")
                            )));
                        }
                    }
                }
                Ok(s)
            }
        }
        d.deserialize_map(Visit)
    }
}

impl HooksSettings {
    /// Warnings for the keys a workspace's own `[hooks]` may not set: only its matcher groups
    /// count (a repository cannot trust itself, turn the user's imports on, change limits or
    /// take variables from the server's environment).
    pub fn workspace_warnings(&self, path: &std::path::Path) -> Vec<String> {
        let d = HooksSettings::default();
        let mut keys = Vec::new();
        if self.enabled != d.enabled {
            keys.push("enabled");
        }
        if self.import != d.import {
            keys.push("import");
        }
        if self.trusted != d.trusted {
            keys.push("trusted");
        }
        if self.timeout != d.timeout {
            keys.push("timeout");
        }
        if self.env != d.env {
            keys.push("env");
        }
        keys.into_iter()
            .map(|k| {
                format!(
                    "{}: `hooks.{k}` is ignored here; it is read only from the user's config",
                    path.display()
                )
            })
            .collect()
    }
}

/// One matcher group: which subjects it applies to and what runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MatcherGroup {
    /// Tool names (tool events) or the source, trigger or reason (other events); absent, `""`
    /// or `"*"`: every one.
    pub matcher: Option<String>,
    /// The handlers, in order.
    pub hooks: Vec<HandlerConfig>,
}

/// One handler as written: `{ type = "command", command = "...", timeout = SECONDS }`. Keys
/// Garuda does not use (Claude Code's `statusMessage`, `async`, …) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandlerConfig {
    /// `command` (the only kind Garuda runs); absent means `command`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The shell command line.
    pub command: Option<String>,
    /// Seconds before the hook's process group is killed.
    pub timeout: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_form_of_claude_json() {
        let text = r#"
import = ["claude"]
timeout = 30

[[PreToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "policy.sh", timeout = 5 }]

[[PreToolUse]]
hooks = [{ command = "log.sh" }]

[[SessionStart]]
matcher = "compact"
hooks = [{ type = "command", command = "echo hi" }]
"#;
        let s: HooksSettings = toml::from_str(text).unwrap();
        assert!(s.enabled);
        assert_eq!(s.import, [ImportSource::Claude]);
        assert_eq!(s.timeout, 30.0);
        let pre = &s.events["PreToolUse"];
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0].matcher.as_deref(), Some("Bash"));
        assert_eq!(pre[0].hooks[0].timeout, Some(5.0));
        assert_eq!(pre[1].hooks[0].kind, None);
        assert_eq!(
            s.events["SessionStart"][0].hooks[0].command.as_deref(),
            Some("echo hi")
        );
        assert!(toml::from_str::<HooksSettings>("import = [\"cursor\"]").is_err());
        let e = toml::from_str::<HooksSettings>("imprt = [\"claude\"]").unwrap_err();
        assert!(e.to_string().contains("unknown key `imprt`"), "{e}");
        let e = toml::from_str::<HooksSettings>("[[pretooluse]]\nhooks = []").unwrap_err();
        assert!(e.to_string().contains("did you mean PreToolUse?"), "{e}");
        let e = toml::from_str::<HooksSettings>(
            "[[Stop]]\nhooks = [{ command = \"x\", timeout = \"5\" }]",
        )
        .unwrap_err();
        assert!(e.span().is_some(), "{e}");
    }
}
