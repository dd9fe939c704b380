//! Skills: folders holding a `SKILL.md` (the Agent Skills format Claude Code, codex, opencode
//! and gemini-cli read), found when a session starts in the workspace's `.garuda/skills/`,
//! `.claude/skills/` and `.agents/skills/` (root-confined, like every instruction file) and in
//! the user's folders. A skill costs one line of the `skill` tool's description until the
//! model loads it; its body is read from disk only then.

mod parse;

use std::path::{Path, PathBuf};

use crate::fsroot::{EntryKind, FileStamp, Root};

pub(crate) use parse::Frontmatter;
pub use parse::{SkillHead, parse_skill};

/// The workspace folders skills are found in, in precedence order (a name found in an
/// earlier folder shadows the same name later).
pub const WORKSPACE_DIRS: [&str; 3] = [".garuda/skills", ".claude/skills", ".agents/skills"];

/// The file of a skill's folder that declares it.
pub const SKILL_FILE: &str = "SKILL.md";

/// Largest `SKILL.md` read, in characters.
const MAX_SKILL_CHARS: usize = 200_000;
/// Most files of a skill's folder listed when it loads.
const MAX_LISTED: usize = 50;

/// Where a skill's folder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillPlace {
    /// In the workspace: the folder is root-relative.
    Workspace,
    /// In one of the user's folders: the folder is absolute.
    User,
}

/// One skill found at session start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// What the frontmatter declares.
    pub head: SkillHead,
    /// Its folder (root-relative for the workspace's, absolute for the user's).
    pub folder: PathBuf,
    /// Where the folder is.
    pub place: SkillPlace,
}

impl Skill {
    /// The `SKILL.md` as shown to people: root-relative or absolute.
    pub fn file(&self) -> String {
        self.folder.join(SKILL_FILE).display().to_string()
    }
}

/// A skill's content, read when the model loads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillBody {
    /// The instructions (frontmatter removed).
    pub text: String,
    /// The other files of its folder, relative to it (sorted, at most [`MAX_LISTED`]).
    pub files: Vec<String>,
}

/// A `SKILL.md` as a scan sees it: which file, and its stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillStamp {
    /// The file, as [`Skill::file`] shows it.
    pub file: String,
    /// Its stamp.
    pub stamp: FileStamp,
}

/// The skills of a session, fixed when it starts (so the tool's bytes stay the same), with
/// the problems found on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillSet {
    /// The skills, sorted by name.
    pub skills: Vec<Skill>,
    /// Malformed files and shadowed names, each naming the file (and the line).
    pub warnings: Vec<String>,
    /// What the scan saw, for noticing changes on disk.
    pub stamps: Vec<SkillStamp>,
}

/// The `[skills]` settings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct SkillSettings {
    /// Offer the `skill` tool when skills are found (default on).
    pub enabled: bool,
    /// Also read the user's Claude Code skills, `~/.claude/skills/` (default off).
    pub claude_user: bool,
}

impl Default for SkillSettings {
    fn default() -> Self {
        SkillSettings {
            enabled: true,
            claude_user: false,
        }
    }
}

/// The places to look in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillDirs {
    /// The user's folders, in precedence order (after the workspace's).
    pub user: Vec<PathBuf>,
}

impl SkillDirs {
    /// The user's skill folders: `skills/` beside the user's config file, and
    /// `~/.claude/skills/` when `claude` is on.
    pub fn of_user(config_dir: Option<&Path>, claude: bool) -> SkillDirs {
        let mut user: Vec<PathBuf> = config_dir.map(|d| d.join("skills")).into_iter().collect();
        if claude && let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            user.push(PathBuf::from(home).join(".claude").join("skills"));
        }
        SkillDirs { user }
    }
}

/// One folder to scan: the root it is read through and the folder's path beneath it.
struct Place<'a> {
    root: &'a Root,
    dir: PathBuf,
    kind: SkillPlace,
}

impl Place<'_> {
    /// The shown folder of the skill `name` in this place.
    fn folder(&self, name: &str) -> PathBuf {
        match self.kind {
            SkillPlace::Workspace => self.dir.join(name),
            SkillPlace::User => self.root.path().join(&self.dir).join(name),
        }
    }
}

/// Finds the skills of a session: the workspace's folders first, then the user's.
pub fn discover(root: &Root, dirs: &SkillDirs) -> SkillSet {
    let user_roots: Vec<Root> = dirs
        .user
        .iter()
        .filter_map(|d| Root::open(d).ok())
        .collect();
    let mut set = SkillSet::default();
    for_each_skill_file(root, &user_roots, |place, name, rel, stamp| {
        set.stamps.push(stamp.clone());
        // Warnings name the file: an invisible character in its name is shown, not obeyed.
        let shown = &crate::text::escape_format_chars(&stamp.file);
        let Some(text) =
            read_definition(place.root, &rel, shown, MAX_SKILL_CHARS, &mut set.warnings)
        else {
            return;
        };
        let head = match parse_skill(&text, name) {
            Ok((head, _)) => head,
            Err(err) => {
                set.warnings.push(format!("{shown}: {err}; skill skipped"));
                return;
            }
        };
        if let Some(first) = set.skills.iter().find(|s| s.head.name == head.name) {
            set.warnings.push(format!(
                "{shown}: skill {} is shadowed by {}",
                head.name,
                first.file()
            ));
            return;
        }
        set.skills.push(Skill {
            head,
            folder: place.folder(name),
            place: place.kind.clone(),
        });
    });
    set.skills.sort_by(|a, b| a.head.name.cmp(&b.head.name));
    set
}

/// Reads a definition file (a skill, an agent) whole: `None`, with a warning naming `shown`,
/// when it cannot be read or is larger than `max` characters.
pub(crate) fn read_definition(
    root: &Root,
    rel: &Path,
    shown: &str,
    max: usize,
    warnings: &mut Vec<String>,
) -> Option<String> {
    match root.read_text(rel, max) {
        Ok(t) if !t.truncated => Some(t.text),
        Ok(_) => {
            warnings.push(format!("{shown}: larger than {max} characters; skipped"));
            None
        }
        Err(err) => {
            warnings.push(format!("{shown}: {err}"));
            None
        }
    }
}

/// The stamps a scan sees now (cheap: no file is read), to compare with [`SkillSet::stamps`].
pub fn scan(root: &Root, dirs: &SkillDirs) -> Vec<SkillStamp> {
    let user_roots: Vec<Root> = dirs
        .user
        .iter()
        .filter_map(|d| Root::open(d).ok())
        .collect();
    let mut out = Vec::new();
    for_each_skill_file(root, &user_roots, |_, _, _, stamp| out.push(stamp));
    out
}

/// Every `SKILL.md` of the workspace's folders, then the user's, that has a stamp: its
/// place, its skill folder's name, its path beneath the place's root and its stamp.
fn for_each_skill_file<'a>(
    root: &'a Root,
    user_roots: &'a [Root],
    mut f: impl FnMut(&Place<'a>, &str, PathBuf, SkillStamp),
) {
    for place in places(root, user_roots) {
        let Ok(entries) = place.root.list(&place.dir) else {
            continue;
        };
        for e in entries.iter().filter(|e| e.kind == EntryKind::Dir) {
            let rel = place.dir.join(&e.name).join(SKILL_FILE);
            if let Ok(stamp) = place.root.stamp(&rel) {
                let file = place.folder(&e.name).join(SKILL_FILE).display().to_string();
                f(&place, &e.name, rel, SkillStamp { file, stamp });
            }
        }
    }
}

fn places<'a>(root: &'a Root, user_roots: &'a [Root]) -> Vec<Place<'a>> {
    let workspace = WORKSPACE_DIRS.iter().map(|d| Place {
        root,
        dir: PathBuf::from(d),
        kind: SkillPlace::Workspace,
    });
    let user = user_roots.iter().map(|r| Place {
        root: r,
        dir: PathBuf::new(),
        kind: SkillPlace::User,
    });
    workspace.chain(user).collect()
}

impl SkillSet {
    /// What the `skill` tool's description lists for a model window of `context_window`
    /// tokens (the rest are found with its `query`).
    pub fn listing(&self, context_window: u64) -> crate::listing::Listing {
        crate::listing::fit(
            self.skills
                .iter()
                .map(|s| (s.head.name.as_str(), s.head.description.as_str())),
            context_window,
        )
    }

    /// The skills whose name or description match keyword `query`, best first, as the
    /// model reads them.
    pub fn search(&self, query: &str) -> String {
        use crate::listing;
        fn key(s: &Skill) -> (&str, &str) {
            (&s.head.name, &s.head.description)
        }
        let found = listing::search(&self.skills, key, query, listing::SEARCH_RESULTS);
        listing::search_text(
            "skills",
            query,
            self.skills.len(),
            found.into_iter().map(key),
        )
    }

    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.head.name == name)
    }

    /// What changed on disk since the session started: files added, removed or changed.
    pub fn changes(&self, now: &[SkillStamp]) -> Vec<String> {
        let mut out = Vec::new();
        for s in now {
            match self.stamps.iter().find(|o| o.file == s.file) {
                None => out.push(format!("{} was added", s.file)),
                Some(o) if o.stamp != s.stamp => out.push(format!("{} changed", s.file)),
                Some(_) => {}
            }
        }
        for o in &self.stamps {
            if !now.iter().any(|s| s.file == o.file) {
                out.push(format!("{} was removed", o.file));
            }
        }
        out
    }

    /// Reads a skill's body and the other files of its folder, through the workspace root
    /// for the workspace's skills and through a root at the folder for the user's.
    pub fn load(&self, name: &str, root: &Root) -> Result<SkillBody, String> {
        let skill = self.get(name).ok_or_else(|| {
            let names = self.skills.iter().map(|s| s.head.name.as_str());
            format!(
                "no skill is called {name:?}; the skills are: {}",
                crate::listing::names_hint(names)
            )
        })?;
        let own;
        let (root, dir) = match skill.place {
            SkillPlace::Workspace => (root, skill.folder.clone()),
            SkillPlace::User => {
                own = Root::open(&skill.folder).map_err(|e| format!("{}: {e}", skill.file()))?;
                (&own, PathBuf::new())
            }
        };
        let text = root
            .read_text(&dir.join(SKILL_FILE), MAX_SKILL_CHARS)
            .map_err(|e| format!("{}: {e}", skill.file()))?;
        let (_, body) = parse_skill(&text.text, &skill.head.name)
            .map_err(|e| format!("{}: {e}", skill.file()))?;
        let mut files = Vec::new();
        list_files(root, &dir, &PathBuf::new(), &mut files, 0);
        files.retain(|f| f != SKILL_FILE);
        files.sort();
        files.truncate(MAX_LISTED);
        Ok(SkillBody { text: body, files })
    }
}

/// The files beneath `dir/sub`, relative to `dir`, three levels deep at most.
fn list_files(root: &Root, dir: &Path, sub: &Path, out: &mut Vec<String>, depth: usize) {
    if depth > 2 || out.len() > MAX_LISTED {
        return;
    }
    let Ok(entries) = root.list(&dir.join(sub)) else {
        return;
    };
    for e in entries {
        let rel = sub.join(&e.name);
        match e.kind {
            EntryKind::File => out.push(rel.display().to_string()),
            EntryKind::Dir => list_files(root, dir, &rel, out, depth + 1),
            EntryKind::Other => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn skill(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\nSteps of {name}.\n")
    }

    #[test]
    fn finds_skills_in_every_folder_sorted_with_shadowing_and_warnings() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".garuda/skills/zeta/SKILL.md",
            &skill("zeta", "Z."),
        );
        write(
            ws.path(),
            ".claude/skills/alpha/SKILL.md",
            &skill("alpha", "A."),
        );
        write(ws.path(), ".claude/skills/alpha/ref/notes.md", "notes");
        write(
            ws.path(),
            ".agents/skills/mid/SKILL.md",
            &skill("mid", "M."),
        );
        write(
            ws.path(),
            ".agents/skills/dup/SKILL.md",
            &skill("zeta", "again"),
        );
        write(
            ws.path(),
            ".agents/skills/bad/SKILL.md",
            "---\nname: bad\n---\n",
        );
        write(user.path(), "mine/SKILL.md", &skill("mine", "Mine."));
        write(user.path(), "mine/script.sh", "echo");
        let root = Root::open(ws.path()).unwrap();
        let dirs = SkillDirs {
            user: vec![user.path().to_path_buf(), ws.path().join("missing")],
        };
        let set = discover(&root, &dirs);
        let names: Vec<&str> = set.skills.iter().map(|s| s.head.name.as_str()).collect();
        assert_eq!(names, ["alpha", "mid", "mine", "zeta"]);
        let w = set.warnings.join("\n");
        assert!(
            w.contains(".agents/skills/bad/SKILL.md: line 2: `description` is missing"),
            "{w}"
        );
        assert!(
            w.contains("shadowed by .garuda/skills/zeta/SKILL.md"),
            "{w}"
        );
        let alpha = set.load("alpha", &root).unwrap();
        assert_eq!(alpha.text, "Steps of alpha.\n");
        assert_eq!(alpha.files, ["ref/notes.md"]);
        let mine = set.load("mine", &root).unwrap();
        assert_eq!(mine.files, ["script.sh"]);
        assert!(set.load("nope", &root).unwrap_err().contains("alpha, mid"));
        assert!(set.changes(&scan(&root, &dirs)).is_empty());
        write(
            ws.path(),
            ".garuda/skills/new/SKILL.md",
            &skill("new", "N."),
        );
        std::fs::remove_dir_all(ws.path().join(".agents/skills/mid")).unwrap();
        let changes = set.changes(&scan(&root, &dirs)).join("\n");
        assert!(
            changes.contains(".garuda/skills/new/SKILL.md was added"),
            "{changes}"
        );
        assert!(
            changes.contains(".agents/skills/mid/SKILL.md was removed"),
            "{changes}"
        );
    }

    #[test]
    fn names_with_format_characters_are_refused_and_shown_escaped() {
        let ws = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".agents/skills/deploy/SKILL.md",
            "---\nname: \"dep\u{2066}loy\"\ndescription: d\n---\nSteps\n",
        );
        // Without a `name`, the folder's name is the name.
        write(
            ws.path(),
            ".agents/skills/bo\u{feff}m/SKILL.md",
            "---\ndescription: d\n---\nSteps\n",
        );
        let set = discover(&Root::open(ws.path()).unwrap(), &SkillDirs::default());
        assert!(set.skills.is_empty(), "{:?}", set.skills);
        let w = set.warnings.join("\n");
        assert!(
            w.contains(".agents/skills/deploy/SKILL.md: line 2:")
                && w.contains("dep\\u{2066}loy")
                && w.contains("skill skipped"),
            "{w}"
        );
        assert!(w.contains(".agents/skills/bo\\u{feff}m/SKILL.md"), "{w}");
        assert!(!w.contains('\u{2066}') && !w.contains('\u{feff}'), "{w}");
    }

    #[test]
    fn a_link_out_of_the_root_is_not_a_skill() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "evil/SKILL.md", &skill("evil", "E."));
        std::fs::create_dir_all(ws.path().join(".garuda/skills")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("evil"),
            ws.path().join(".garuda/skills/evil"),
        )
        .unwrap();
        let root = Root::open(ws.path()).unwrap();
        let set = discover(&root, &SkillDirs::default());
        assert!(set.skills.is_empty(), "{set:?}");
    }
}
