//! Reading a config file without giving up on it: every problem is named (file, line, key,
//! what was expected), an unknown key is a warning and the rest of the file applies, an
//! invalid value is an error and the file is not used until it is fixed.
//!
//! toml stops at its first problem, so the text is parsed again with the offending key's line
//! (or, for an unknown table, its whole section) blanked, until it parses: each pass finds one
//! more problem, and blanking keeps every later line number true.

use std::fmt;
use std::path::{Path, PathBuf};

use super::Config;

/// How bad a configuration problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The key is ignored; the rest of the file applies.
    Warning,
    /// The file is not used until it is fixed.
    Error,
}

/// One problem of a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Warning or error.
    pub severity: Severity,
    /// The file (or `environment` for a variable).
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The dotted key (`approval.policy`; a table: `approvals`), when known.
    pub key: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ": line {line}")?;
            if let Some(col) = self.column {
                write!(f, ", column {col}")?;
            }
        }
        if let Some(key) = &self.key {
            write!(f, ": `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A config file as read: what is in force and what is wrong with it.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The config (with its warnings' keys left out); `None` when the file has errors.
    pub config: Option<Config>,
    /// Every problem found, in file order.
    pub problems: Vec<ConfigProblem>,
}

impl Checked {
    /// The errors among the problems.
    pub fn errors(&self) -> impl Iterator<Item = &ConfigProblem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }
}

/// Most problems one file reports; past it the rest are not looked for.
const MAX_PROBLEMS: usize = 32;

/// Checks config text; `path` names the file in the problems.
pub fn check_text(text: &str, path: &Path) -> Checked {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let mut problems: Vec<ConfigProblem> = Vec::new();
    let mut has_error = false;
    loop {
        let joined = lines.join("\n");
        let err = match toml::from_str::<Config>(&joined) {
            Ok(cfg) => {
                let config = (!has_error).then_some(cfg);
                problems.sort_by_key(|p| p.line);
                return Checked { config, problems };
            }
            Err(e) => e,
        };
        let at = err.span().map(|s| position(&joined, s.start));
        let message = err.message().trim().replace('\n', " ");
        let unknown = unknown_field(&message);
        let key = at.and_then(|(line, _)| key_at(&lines, line, unknown.as_ref().map(|u| &u.0)));
        let problem = ConfigProblem {
            severity: if unknown.is_some() {
                Severity::Warning
            } else {
                Severity::Error
            },
            path: path.to_path_buf(),
            line: at.map(|(l, _)| l),
            column: at.map(|(_, c)| c),
            key,
            message: match &unknown {
                Some((field, expected)) => unknown_message(field, expected),
                None => message,
            },
        };
        has_error |= problem.severity == Severity::Error;
        problems.push(problem);
        // Without a line to blank the same error would come back: stop here.
        let Some((line, _)) = at else {
            return Checked {
                config: None,
                problems,
            };
        };
        if problems.len() >= MAX_PROBLEMS || !blank(&mut lines, line) {
            // The rest of the file was not checked: it is not used.
            problems.sort_by_key(|p| p.line);
            return Checked {
                config: None,
                problems,
            };
        }
    }
}

/// 1-based line and column of a byte offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// toml's "unknown field `x`, expected one of `a`, `b`" as the field and the expected names.
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((field.to_string(), expected))
}

fn unknown_message(field: &str, expected: &[String]) -> String {
    let hint = crate::provider::models::closest(field, expected.iter().map(String::as_str))
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    let known = if expected.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = expected.iter().map(|e| format!("`{e}`")).collect();
        format!(" (known here: {})", names.join(", "))
    };
    format!("unknown key, ignored{hint}{known}")
}

/// The dotted key on 1-based `line`: the section above it and the line's own key (a section
/// header names itself).
fn key_at(lines: &[String], line: usize, field: Option<&String>) -> Option<String> {
    let text = lines.get(line.checked_sub(1)?)?.trim();
    if let Some(header) = header_of(text) {
        return Some(header);
    }
    let own = field.cloned().or_else(|| {
        let (k, _) = text.split_once('=')?;
        Some(k.trim().trim_matches('"').to_string())
    })?;
    let section = lines[..line - 1]
        .iter()
        .rev()
        .find_map(|l| header_of(l.trim()));
    Some(match section {
        Some(s) => format!("{s}.{own}"),
        None => own,
    })
}

/// `approval` of `[approval]` (and of `[[approval]]`).
fn header_of(line: &str) -> Option<String> {
    let inner = line.strip_prefix('[')?;
    let end = inner.find(']')?;
    let name = inner[..end].trim_matches('[').trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// Blanks 1-based `line`, or a whole section when it is a header; false when nothing changed.
fn blank(lines: &mut [String], line: usize) -> bool {
    let Some(start) = line.checked_sub(1).filter(|&i| i < lines.len()) else {
        return false;
    };
    let is_header = header_of(lines[start].trim()).is_some();
    let end = if is_header {
        lines[start + 1..]
            .iter()
            .position(|l| header_of(l.trim()).is_some())
            .map_or(lines.len(), |p| start + 1 + p)
    } else {
        start + 1
    };
    let mut changed = false;
    for l in &mut lines[start..end] {
        changed |= !l.is_empty();
        l.clear();
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Checked {
        check_text(text, Path::new("/c/config.toml"))
    }

    #[test]
    fn an_unknown_table_is_a_warning_with_a_suggestion_and_the_rest_applies() {
        let c = check(
            "model = \"anthropic/x\"\n\n[approvals]\npolicy = \"full-auto\"\n\n[server]\nmax_in_flight = 3\n",
        );
        let cfg = c.config.as_ref().expect("config applies");
        assert_eq!(cfg.model.as_deref(), Some("anthropic/x"));
        assert_eq!(cfg.server.max_in_flight, 3);
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
        let p = &c.problems[0];
        assert_eq!(p.severity, Severity::Warning);
        assert_eq!(p.line, Some(3));
        assert_eq!(p.key.as_deref(), Some("approvals"));
        assert!(
            p.message.contains("did you mean `approval`?"),
            "{}",
            p.message
        );
        assert!(
            p.to_string()
                .starts_with("/c/config.toml: line 3, column 2: `approvals`"),
            "{p}"
        );
    }

    #[test]
    fn an_unknown_key_names_its_section() {
        let c = check("[approval]\npolcy = \"ask\"\ntimeout_secs = 5\n");
        assert_eq!(c.config.as_ref().expect("applies").approval.timeout_secs, 5);
        let p = &c.problems[0];
        assert_eq!(
            (p.severity, p.line, p.key.as_deref()),
            (Severity::Warning, Some(2), Some("approval.polcy"))
        );
        assert!(p.message.contains("`policy`"), "{}", p.message);
    }

    #[test]
    fn a_bad_value_is_an_error_and_every_problem_is_reported() {
        let c = check(
            "[approval]\npolicy = \"yolo\"\n[server]\nmax_in_flight = \"many\"\n[nope]\nx = 1\n",
        );
        assert!(c.config.is_none());
        let got: Vec<_> = c
            .problems
            .iter()
            .map(|p| (p.severity, p.line, p.key.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Severity::Error, Some(2), Some("approval.policy".into())),
                (
                    Severity::Error,
                    Some(4),
                    Some("server.max_in_flight".into())
                ),
                (Severity::Warning, Some(5), Some("nope".into())),
            ]
        );
        assert!(
            c.problems[0].message.contains("ask"),
            "{}",
            c.problems[0].message
        );
    }

    #[test]
    fn broken_toml_is_an_error_with_its_line() {
        let c = check("model = \"a\"\n[approval\n");
        assert!(c.config.is_none());
        assert_eq!(c.problems[0].severity, Severity::Error);
        assert_eq!(c.problems[0].line, Some(2));
        assert!(check("").config.is_some());
    }
}
