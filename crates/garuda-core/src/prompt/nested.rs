//! Nested instruction files and path-scoped rules: which are in force for the paths a
//! session touched, and the `<garuda_note>`s that bring them to the model. Pure: the files
//! are read by [`super::gather_dir`] and [`super::gather_with`].
//!
//! A touched path puts in force the instruction files of its folder and of every folder
//! above it up to (not including) the root, whose files are in the system prompt, and every
//! rule whose globs match it. Each one is rendered on its own, within its own limit, so its
//! text (and its version, a hash of that text) depends only on the file: a note and the
//! re-attachment after a compaction carry the same bytes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::instructions::{cut_note, missing, prefix};
use super::sources::{FILE_NAMES, RuleMatcher};
use super::{Content, Placement, Rule, SourceFile, SourceKind, SourceReport};

/// The paths a session's tools touched (root-relative, `/`-separated, never the root).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    /// Folders worked in: the folders of files read or edited, folders listed or searched.
    pub dirs: BTreeSet<String>,
    /// Files read, edited or searched.
    pub files: BTreeSet<String>,
}

/// The folders whose instruction files govern `dir`: every folder from the root's child
/// down to `dir` itself. The root (`""` or `.`) has none.
pub fn chain(dir: &str) -> Vec<String> {
    let dir = dir.trim_matches('/');
    if dir.is_empty() || dir == "." {
        return Vec::new();
    }
    let mut out: Vec<String> = dir
        .match_indices('/')
        .map(|(i, _)| dir[..i].to_string())
        .collect();
    out.push(dir.to_string());
    out
}

/// Every folder whose files are in force for `touched`.
pub fn chain_dirs(touched: &Touched) -> BTreeSet<String> {
    touched.dirs.iter().flat_map(|d| chain(d)).collect()
}

/// A nested file or path-scoped rule in force, rendered on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scoped {
    /// Root-relative path of the file.
    pub path: String,
    /// Nested file or rule.
    pub kind: SourceKind,
    /// The folder it governs (`packages/a/`) or the rule's globs.
    pub scope: String,
    /// The heading line, without `## `.
    pub heading: String,
    /// Its text within its limit, with the cut note when cut.
    pub body: String,
    /// True when it was cut.
    pub cut: bool,
    /// Characters left out when cut.
    pub missing_chars: Option<u64>,
    /// Hex sha256 of heading and body: a new version is sent again.
    pub version: String,
}

impl Scoped {
    fn new(path: &str, kind: SourceKind, scope: String, heading: String, body: String) -> Self {
        let mut h = Sha256::new();
        h.update(heading.as_bytes());
        h.update([0]);
        h.update(body.as_bytes());
        let version = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Scoped {
            path: path.to_string(),
            kind,
            scope,
            heading,
            body,
            cut: false,
            missing_chars: None,
            version,
        }
    }

    /// Its block in a note.
    pub fn block(&self, changed: bool) -> String {
        let extra = if changed {
            "; changed on disk: this text replaces the earlier one"
        } else {
            ""
        };
        format!("## {}{extra}\n\n{}", self.heading, self.body)
    }

    /// Characters of its block.
    pub fn chars(&self) -> usize {
        self.block(false).chars().count()
    }

    /// Its line in a report.
    pub fn report(&self, in_force: bool) -> SourceReport {
        let mut r = SourceReport::of(
            &self.path,
            self.kind,
            self.scope.clone(),
            Placement::Note,
            &self.block(false),
            self.cut,
            self.missing_chars,
        );
        r.in_force = in_force;
        r
    }
}

/// What is in force for a set of touched paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InForce {
    /// In force, in note order: nested files from the outermost folder in, then rules.
    pub scoped: Vec<Scoped>,
    /// Files found but not used (empty, duplicates, links out of the root…).
    pub skipped: Vec<SourceReport>,
}

/// What is in force for `touched`: the files of `dir_files` (folder → its nested files, as
/// read) for every folder on a touched chain, and the path-scoped `rules` matching a touched
/// path. A file whose text equals a root file's or another one's is left out as a duplicate.
pub fn in_force(
    touched: &Touched,
    dir_files: &BTreeMap<String, Arc<Vec<SourceFile>>>,
    rules: &[Rule],
    root_files: &[SourceFile],
    limit: usize,
) -> InForce {
    let mut out = InForce::default();
    let mut seen: HashMap<String, String> = HashMap::new();
    for f in root_files {
        if let Content::Text(t) = &f.content {
            seen.entry(t.text.clone()).or_insert_with(|| f.name.clone());
        }
    }
    let order = |name: &str| {
        FILE_NAMES
            .iter()
            .position(|n| name.ends_with(&format!("/{n}")))
            .unwrap_or(FILE_NAMES.len())
    };
    let mut dirs: Vec<&String> = chain_dirs(touched)
        .iter()
        .filter_map(|d| dir_files.get_key_value(d).map(|(k, _)| k))
        .collect();
    dirs.sort_by_key(|d| (d.matches('/').count(), d.as_str()));
    for dir in dirs {
        let mut files: Vec<&SourceFile> = dir_files[dir].iter().collect();
        files.sort_by_key(|f| order(&f.name));
        let scope = format!("{dir}/");
        for f in files {
            let heading = format!("{} (governs {scope})", f.name);
            match render(
                f,
                SourceKind::Nested,
                scope.clone(),
                heading,
                limit,
                &mut seen,
            ) {
                Ok(s) => out.scoped.push(s),
                Err(r) => out.skipped.push(r),
            }
        }
    }
    for rule in rules {
        let Some(globs) = rule.globs() else { continue };
        let (m, _) = RuleMatcher::new(globs);
        let hit =
            touched.files.iter().any(|f| m.file(f)) || touched.dirs.iter().any(|d| m.folder(d));
        if !hit {
            continue;
        }
        let scope = globs.join(", ");
        let heading = format!("{} (a rule for {scope})", rule.file.name);
        match render(
            &rule.file,
            SourceKind::Rule,
            scope,
            heading,
            limit,
            &mut seen,
        ) {
            Ok(s) => out.scoped.push(s),
            Err(r) => out.skipped.push(r),
        }
    }
    out
}

/// Renders one file within `limit`, or the report of why it is left out.
fn render(
    f: &SourceFile,
    kind: SourceKind,
    scope: String,
    heading: String,
    limit: usize,
    seen: &mut HashMap<String, String>,
) -> Result<Scoped, SourceReport> {
    let skip = |why: String| {
        SourceReport::unused(&f.name, kind, scope.clone(), Placement::Note, Some(why))
    };
    let t = match &f.content {
        Content::Skipped(why) => return Err(skip(why.clone())),
        Content::Text(t) if t.text.trim().is_empty() && !t.truncated => {
            return Err(skip("empty".into()));
        }
        Content::Text(t) => t,
    };
    if let Some(first) = seen.get(&t.text) {
        let why = match &f.link {
            Some(l) => format!("duplicate of {first} ({} links to {l})", f.name),
            None => format!("duplicate of {first}"),
        };
        return Err(skip(why));
    }
    seen.insert(t.text.clone(), f.name.clone());
    let kept = prefix(&t.text, limit);
    let cut = kept.len() < t.text.len() || t.truncated;
    let mut body = kept.trim_end().to_string();
    let mut missing_chars = None;
    if cut {
        let (miss, exact) = missing(t, limit);
        missing_chars = Some(miss);
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str(&cut_note(
            &f.name,
            limit,
            miss,
            exact,
            "one nested instruction file or rule",
        ));
    }
    let mut s = Scoped::new(&f.name, kind, scope, heading, body);
    s.cut = cut;
    s.missing_chars = missing_chars;
    Ok(s)
}

/// One entry of a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteEntry<'a> {
    /// Newly in force.
    Added(&'a Scoped),
    /// In force before with another text.
    Changed(&'a Scoped),
    /// No longer in force (deleted, or no longer matching), by path.
    Removed(&'a str),
}

const HOW: &str = "Each nested file governs its folder and the folders below it, and a rule the \
    paths its globs match. They add to the project instructions in the system prompt; where \
    they conflict, the file of the nearest folder wins over those of the folders above it and \
    over the root files.";

/// The note that brings newly touched instructions (and changes to them) to the model.
pub fn note(entries: &[NoteEntry<'_>]) -> String {
    let mut blocks = Vec::new();
    let mut gone = Vec::new();
    for e in entries {
        match e {
            NoteEntry::Added(s) => blocks.push(s.block(false)),
            NoteEntry::Changed(s) => blocks.push(s.block(true)),
            NoteEntry::Removed(p) => gone.push(*p),
        }
    }
    let mut text =
        format!("<garuda_note>Instructions for the part of the project you are working in. {HOW}");
    for b in blocks {
        text.push_str("\n\n");
        text.push_str(&b);
    }
    if !gone.is_empty() {
        text.push_str(&format!(
            "\n\nNo longer in force (deleted, or no longer matching what you touched): {}.",
            gone.join(", ")
        ));
    }
    text.push_str("\n</garuda_note>");
    text
}

/// The note an installation carries after a compaction: every nested file and rule in
/// force, re-read from disk; those left out for room are named with their size.
pub fn reattach_note(kept: &[&Scoped], left_out: &[&Scoped]) -> String {
    let mut text = format!(
        "<garuda_note>Instructions still in force after the compaction, re-read from disk: the \
         nested instruction files of the folders you worked in and the rules matching paths you \
         touched. {HOW}"
    );
    for s in kept {
        text.push_str("\n\n");
        text.push_str(&s.block(false));
    }
    if !left_out.is_empty() {
        let names: Vec<String> = left_out
            .iter()
            .map(|s| format!("{} ({} characters)", s.path, s.chars()))
            .collect();
        text.push_str(&format!(
            "\n\n[Garuda: also in force but not repeated here for room: {}. Each comes back \
             when you next work in the folder or on a path it governs.]",
            names.join(", ")
        ));
    }
    text.push_str("\n</garuda_note>");
    text
}

#[cfg(test)]
mod tests {
    use super::super::FileText;
    use super::super::sources::Source;
    use super::*;
    use crate::prompt::Applies;

    fn file(name: &str, body: &str) -> SourceFile {
        SourceFile {
            name: name.into(),
            link: None,
            content: Content::Text(FileText {
                text: body.into(),
                truncated: false,
                total_bytes: body.len() as u64,
                lossy: false,
                total_chars: Some(body.chars().count() as u64),
            }),
        }
    }

    fn touched(files: &[&str]) -> Touched {
        let mut t = Touched::default();
        for f in files {
            t.files.insert(f.to_string());
            if let Some((d, _)) = f.rsplit_once('/') {
                t.dirs.insert(d.to_string());
            }
        }
        t
    }

    #[test]
    fn chains() {
        assert_eq!(
            chain("packages/a/src"),
            ["packages", "packages/a", "packages/a/src"]
        );
        assert!(chain(".").is_empty() && chain("").is_empty());
        assert_eq!(chain("x"), ["x"]);
    }

    #[test]
    fn nearest_last_rules_after_duplicates_out_and_cuts_visible() {
        let mut dirs = BTreeMap::new();
        dirs.insert(
            "packages".to_string(),
            Arc::new(vec![file("packages/AGENTS.md", "Packages rule.")]),
        );
        dirs.insert(
            "packages/a".to_string(),
            Arc::new(vec![
                file("packages/a/AGENTS.md", "Package A rule."),
                file("packages/a/CLAUDE.md", "Package A rule."),
            ]),
        );
        dirs.insert(
            "packages/b".to_string(),
            Arc::new(vec![file("packages/b/CLAUDE.md", &"b".repeat(50))]),
        );
        let rules = vec![
            Rule {
                file: file(".cursor/rules/a.mdc", "Rule A."),
                source: Source::Cursor,
                applies: Applies::Paths(vec!["packages/a/**".into()]),
            },
            Rule {
                file: file(".cursor/rules/b.mdc", "Rule B."),
                source: Source::Cursor,
                applies: Applies::Paths(vec!["packages/b/**".into()]),
            },
        ];
        let root = vec![file("AGENTS.md", "Packages rule.")];
        let f = in_force(&touched(&["packages/a/x.rs"]), &dirs, &rules, &[], 20);
        let paths: Vec<&str> = f.scoped.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "packages/AGENTS.md",
                "packages/a/AGENTS.md",
                ".cursor/rules/a.mdc"
            ]
        );
        assert_eq!(f.skipped.len(), 1, "the CLAUDE.md copy is a duplicate");
        assert_eq!(
            f.scoped[1].heading,
            "packages/a/AGENTS.md (governs packages/a/)"
        );
        // A root file with the same text makes the nested copy a duplicate.
        let f = in_force(&touched(&["packages/a/x.rs"]), &dirs, &rules, &root, 20);
        assert_eq!(f.scoped[0].path, "packages/a/AGENTS.md");
        // The oversized file is cut to its own limit, visibly.
        let f = in_force(&touched(&["packages/b/y.rs"]), &dirs, &rules, &[], 20);
        let b = f
            .scoped
            .iter()
            .find(|s| s.path == "packages/b/CLAUDE.md")
            .unwrap();
        assert!(b.cut);
        assert_eq!(b.missing_chars, Some(30));
        assert!(b.body.contains("30 characters are missing"), "{}", b.body);
        // Versions depend on the text only.
        let again = in_force(&touched(&["packages/b/z.rs"]), &dirs, &rules, &[], 20);
        assert_eq!(again.scoped, f.scoped);
    }

    #[test]
    fn notes_name_scope_and_changes() {
        let s = Scoped::new(
            "packages/a/AGENTS.md",
            SourceKind::Nested,
            "packages/a/".into(),
            "packages/a/AGENTS.md (governs packages/a/)".into(),
            "Use tabs.".into(),
        );
        let n = note(&[
            NoteEntry::Changed(&s),
            NoteEntry::Removed("packages/b/CLAUDE.md"),
        ]);
        assert!(n.starts_with("<garuda_note>") && n.ends_with("</garuda_note>"));
        assert!(n.contains("## packages/a/AGENTS.md (governs packages/a/); changed on disk"));
        assert!(n.contains("No longer in force (deleted, or no longer matching what you touched): packages/b/CLAUDE.md."));
        let r = reattach_note(&[&s], &[&s]);
        assert!(
            r.contains("not repeated here for room: packages/a/AGENTS.md ("),
            "{r}"
        );
    }
}
