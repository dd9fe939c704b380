//! Whether a repository's own git configuration is inert: it names no program git could run
//! and does not move where git reads its configuration from. Judged by an allow-list of the
//! keys `git clone` and `git init` write and a person commonly adds (the core settings, remotes,
//! branches, the user's name), never by a list of dangerous keys: anything else (a filter,
//! `gpg.program`, `core.fsmonitor`, a pager, `diff.external`, `core.sshCommand`, a credential
//! helper, `include.path`, `core.worktree`, an alias, a key git adds tomorrow) or any line this
//! reader cannot classify makes the configuration not inert, and git then runs only in the
//! sandbox. Pure: the caller reads the files.

/// Keys a repository's config may hold and stay inert, as `section.key` (lowercase); a
/// `*` section matches any subsection (`remote.origin.url`).
const INERT_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.checkstat",
    "core.trustctime",
    "core.untrackedcache",
    "core.commitgraph",
    "core.abbrev",
    "extensions.objectformat",
    "extensions.refstorage",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.tagopt",
    "remote.*.prune",
    "remote.*.mirror",
    "branch.*.remote",
    "branch.*.pushremote",
    "branch.*.merge",
    "branch.*.rebase",
    "branch.*.description",
    "user.name",
    "user.email",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "gc.auto",
    "lfs.repositoryformatversion",
];

/// True when every line of `text` (a `.git/config`) is blank, a comment, a section header or
/// an allow-listed key, as git's own reader would see it or stricter: a header with more on
/// its line, a continued value, a byte-order mark or anything unusual is not inert.
pub(crate) fn config_is_inert(text: &str) -> bool {
    let mut section: Option<(String, bool)> = None;
    for raw in text.lines() {
        let line = raw.trim_matches([' ', '\t', '\r']);
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // A value continued on the next line hides that line from a line reader.
        if line.ends_with('\\') {
            return false;
        }
        if let Some(rest) = line.strip_prefix('[') {
            match header(rest) {
                Some(s) => section = Some(s),
                None => return false,
            }
            continue;
        }
        let Some((name, sub)) = &section else {
            return false;
        };
        let key: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let after = line[key.len()..].trim_start_matches([' ', '\t']);
        let starts_alpha = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        if !starts_alpha || !(after.is_empty() || after.starts_with('=')) {
            return false;
        }
        let key = key.to_ascii_lowercase();
        let allowed = INERT_KEYS.iter().any(|k| {
            let mut parts = k.splitn(3, '.');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(s), Some(f), None) => !sub && s == name && f == key,
                (Some(s), Some("*"), Some(f)) => *sub && s == name && f == key,
                _ => false,
            }
        });
        if !allowed {
            return false;
        }
    }
    true
}

/// The section of a header line after its `[`: its lowercase name and whether it has a
/// subsection (`[remote "origin"]`); None for anything else (`[remote.origin]`, the old
/// spelling, a header with a key on its line, an unclosed quote).
fn header(rest: &str) -> Option<(String, bool)> {
    let close = rest.rfind(']')?;
    if !rest[close + 1..].trim().is_empty() {
        return None;
    }
    let inner = &rest[..close];
    let name: String = inner
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if name.is_empty() {
        return None;
    }
    let tail = &inner[name.len()..];
    let name = name.to_ascii_lowercase();
    if tail.is_empty() {
        return Some((name, false));
    }
    let quoted = tail.strip_prefix(" \"")?.strip_suffix('"')?;
    // A subsection is data; quotes and backslashes in it would need git's unescaping.
    if quoted.contains(['"', '\\']) {
        return None;
    }
    Some((name, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_clone_and_init_write_is_inert() {
        let clone = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                     \tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\
                     \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
                     \tremote = origin\n\tmerge = refs/heads/main\n; a comment\n# another\n\n\
                     [user]\n\tname = A Person\n\temail = a@example.com\n";
        assert!(config_is_inert(clone));
        assert!(config_is_inert(""));
        assert!(config_is_inert("[Core]\n\tFileMode = false\n"));
    }

    #[test]
    fn anything_that_runs_or_redirects_is_not() {
        for cfg in [
            "[filter \"x\"]\n\tclean = ./evil\n",
            "[gpg]\n\tprogram = ./evil\n",
            "[log]\n\tshowSignature = true\n",
            "[core]\n\tfsmonitor = ./evil\n",
            "[core]\n\tpager = ./evil\n",
            "[core]\n\tsshCommand = ./evil\n",
            "[core]\n\thooksPath = ./h\n",
            "[core]\n\tworktree = /elsewhere\n",
            "[diff]\n\texternal = ./evil\n",
            "[credential]\n\thelper = ./evil\n",
            "[include]\n\tpath = ../x.cfg\n",
            "[includeIf \"gitdir:/\"]\n\tpath = x\n",
            "[alias]\n\tst = !evil\n",
            "[remote \"o\"]\n\tuploadpack = ./evil\n",
            "[extensions]\n\tworktreeConfig = true\n",
            // Tricks a line reader could miss.
            "[core] fsmonitor = ./evil\n",
            "[core]\n\tbare = false \\\n[filter \"x\"]\n",
            "\u{feff}[core]\n\tbare = false\n",
            "bare = false\n",
            "[core.x]\n\tbare = false\n",
            "[remote \"a\\\"b\"]\n\turl = x\n",
            "[core]\n\t=x\n",
            "[core]\n\tbare: false\n",
            "[remote]\n\turl = x\n",
            "[user \"x\"]\n\tname = x\n",
        ] {
            assert!(!config_is_inert(cfg), "{cfg:?}");
        }
    }
}
