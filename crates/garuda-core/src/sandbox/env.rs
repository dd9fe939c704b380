//! The environment a command gets: an allow-list of names whose values come from the server's
//! environment, plus fixed values the caller sets. Nothing else crosses, so a secret under any
//! name (not only names that look like keys) stays out of reach.

use std::ffi::OsString;

/// Variables every command gets from the server's environment when they are set.
/// `GARUDA_OWNER` is the marker an editor client gives the server so it can find and stop the
/// commands a killed server left behind; it names the client, it is no secret.
pub const ENV_ALLOW_LIST: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "TERM",
    "GARUDA_OWNER",
    // Where the Rust toolchain is (paths, no secrets; the sandbox shows these folders).
    "CARGO_HOME",
    "RUSTUP_HOME",
];

/// Which variables a command sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPolicy {
    /// Names passed through from the server's environment when set there: [`ENV_ALLOW_LIST`]
    /// plus the user's additions from config.
    pub pass: Vec<String>,
    /// Fixed values (name, value), set after `pass` so they win, e.g. `PAGER=cat`.
    pub set: Vec<(String, String)>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy {
            pass: ENV_ALLOW_LIST.iter().map(|s| s.to_string()).collect(),
            set: Vec::new(),
        }
    }
}

impl EnvPolicy {
    /// The allow-list plus the user's extra names (duplicates dropped).
    pub fn with_extra(extra: &[String]) -> Self {
        let mut p = EnvPolicy::default();
        for name in extra {
            if !p.pass.iter().any(|n| n == name) {
                p.pass.push(name.clone());
            }
        }
        p
    }

    /// The (name, value) pairs a command gets, reading passed names through `lookup`.
    pub fn resolve(&self, lookup: &dyn Fn(&str) -> Option<OsString>) -> Vec<(OsString, OsString)> {
        let mut out: Vec<(OsString, OsString)> = Vec::new();
        let mut put = |k: OsString, v: OsString| match out.iter_mut().find(|(n, _)| *n == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        };
        for name in &self.pass {
            // An empty or `=`-containing name cannot be a variable; skip rather than fail the
            // command for a typo in the config.
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                continue;
            }
            if let Some(v) = lookup(name) {
                put(name.into(), v);
            }
        }
        for (k, v) in &self.set {
            put(k.into(), v.into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_names_pass_and_fixed_values_win() {
        let p = EnvPolicy {
            pass: vec!["PATH".into(), "HOME".into(), "MISSING".into(), "A=B".into()],
            set: vec![("HOME".into(), "/h".into()), ("PAGER".into(), "cat".into())],
        };
        let got = p.resolve(&|n| match n {
            "PATH" => Some("/bin".into()),
            "HOME" => Some("/root".into()),
            "SECRET" => Some("x".into()),
            _ => None,
        });
        assert_eq!(
            got,
            vec![
                ("PATH".into(), "/bin".into()),
                ("HOME".into(), "/h".into()),
                ("PAGER".into(), "cat".into())
            ]
        );
    }

    #[test]
    fn user_additions_extend_the_list_once() {
        let p = EnvPolicy::with_extra(&["CC".into(), "PATH".into()]);
        assert_eq!(
            p.pass,
            vec![
                "PATH",
                "HOME",
                "LANG",
                "TERM",
                "GARUDA_OWNER",
                "CARGO_HOME",
                "RUSTUP_HOME",
                "CC"
            ]
        );
    }
}
