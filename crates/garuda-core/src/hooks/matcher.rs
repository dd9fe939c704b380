//! Matchers as Claude Code reads them: a plain name list (`Bash`, `Edit|Write`) matches names
//! exactly; anything else is a regular expression searched in the name (`mcp__memory__.*`,
//! `Notebook.*`); absent, `""` and `"*"` match everything.

/// A compiled matcher.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Matches every subject.
    All,
    /// One of these names exactly (case-sensitive).
    Names(Vec<String>),
    /// A regular expression found anywhere in the subject.
    Regex(regex::Regex),
}

/// Why a matcher cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("matcher {matcher:?} is not a valid regular expression: {message}")]
pub struct MatcherError {
    /// The matcher as written.
    pub matcher: String,
    /// The regex parser's message, on one line.
    pub message: String,
}

impl Matcher {
    /// Compiles a matcher as written in a config file.
    pub fn parse(matcher: Option<&str>) -> Result<Matcher, MatcherError> {
        let m = matcher.map(str::trim).unwrap_or("");
        if m.is_empty() || m == "*" {
            return Ok(Matcher::All);
        }
        // Claude Code's rule: only letters, digits, `_` and `|` make a list of exact names,
        // so `Bash` does not match `BashOutput`.
        if m.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            return Ok(Matcher::Names(
                m.split('|')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            ));
        }
        // A bounded program: a matcher is the user's, but a pathological one must not make
        // every tool call slow to start.
        regex::RegexBuilder::new(m)
            .size_limit(1 << 20)
            .build()
            .map(Matcher::Regex)
            .map_err(|e| MatcherError {
                matcher: m.to_string(),
                message: e.to_string().replace('\n', " "),
            })
    }

    /// True when any of `names` (one subject under its several names) matches.
    pub fn matches_any(&self, names: &[&str]) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(list) => names.iter().any(|n| list.iter().any(|l| l == n)),
            Matcher::Regex(re) => names.iter().any(|n| re.is_match(n)),
        }
    }

    /// True when the subject `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        self.matches_any(&[name])
    }
}

/// The names a tool call is matched under: Garuda's name, then Claude Code's names for the
/// same tool (`bash` → `Bash`; `edit_file` → `Edit`, `MultiEdit`). MCP tools keep their
/// `mcp__SERVER__TOOL` name, which both agents share.
pub fn tool_match_names(tool: &str) -> Vec<&str> {
    let mut names = vec![tool];
    names.extend(crate::tools::claude_aliases(tool).iter().copied());
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Matcher {
        Matcher::parse(Some(s)).unwrap()
    }

    #[test]
    fn claude_names_match_garuda_tools_and_garuda_names_match_too() {
        let hit = |matcher: &str, tool: &str| m(matcher).matches_any(&tool_match_names(tool));
        assert!(hit("Bash", "bash"));
        assert!(hit("bash", "bash"));
        assert!(hit("Edit|MultiEdit|Write", "edit_file"));
        assert!(hit("Edit|MultiEdit|Write", "write_file"));
        assert!(hit("MultiEdit", "edit_file"));
        assert!(!hit("Edit|Write", "read_file"));
        assert!(hit("Read", "read_file"));
        assert!(hit("LS", "list_files"));
        assert!(hit("TodoWrite", "todo_write"));
        assert!(hit("Grep|Glob", "glob"));
        assert!(hit("mcp__memory__.*", "mcp__memory__create_entities"));
        assert!(!hit("mcp__memory__.*", "mcp__github__search"));
        assert!(hit("mcp__github__search", "mcp__github__search"));
        assert!(
            hit("Notebook.*|Write", "write_file"),
            "a regex searches every name"
        );
        assert!(!hit("Bash", "bash_output"), "plain names are exact");
        assert!(!hit("bash", "remember"));
        for all in ["", "*", "  "] {
            assert!(hit(all, "anything"));
        }
        assert!(Matcher::parse(None).unwrap().matches("x"));
        assert!(m("compact").matches("compact") && !m("compact").matches("startup"));
        assert!(m("startup|resume").matches("resume"));
    }

    #[test]
    fn a_bad_regex_is_an_error_naming_it() {
        let e = Matcher::parse(Some("Edit(")).unwrap_err();
        assert_eq!(e.matcher, "Edit(");
        assert!(e.to_string().contains("Edit("), "{e}");
        assert!(
            Matcher::parse(Some(r"mcp__\w+__write")).is_ok(),
            "Perl classes"
        );
    }
}
