//! System prompt assembly: a pure function of what was read from the workspace and the
//! session's options.
//!
//! [`gather`] does all the IO, through [`crate::fsroot::Root`]; [`assemble`] is pure and
//! deterministic: no time and no counters go into the prompt, so the same inputs give the
//! same bytes and the same sha256, and the provider's prompt cache stays valid.
//!
//! The parts, in order: base rules with the identity line, the optional feature lines,
//! `# Build and test (detected by Garuda)`, `# Project instructions`, `# Project memory`,
//! `# MCP server instructions` (untrusted, capped: [`mcp`]).

mod base;
pub mod changes;
mod features;
mod instructions;
pub mod lean;
pub mod mcp;
mod memory;
pub mod nested;
mod profiles;
pub mod sources;
mod visible;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fsroot::{FsError, Root};
use crate::message::estimate_tokens;

pub use features::{CodeIndex, Features, Offer, SessionFacts, UnknownFeature};
pub use instructions::split_budget;
pub use profiles::{Probe, Profile, detect as detect_profiles};
pub use sources::{Applies, InstructionSettings, Rule, Source};
pub use visible::visible;

/// The instruction files, in the order they appear in the prompt.
pub const INSTRUCTION_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "GARUDA.md"];
/// The memory file, relative to the root.
pub const MEMORY_FILE: &str = ".garuda/memory.md";

/// What the prompt is assembled for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PromptOptions {
    /// The session's start model, named in the identity line.
    pub model: String,
    /// Garuda's version, named in the identity line.
    pub version: String,
    /// Switches for lines about external tools.
    pub features: Features,
    /// What the session really has: the lines about commands and tools.
    pub facts: SessionFacts,
    /// Character limits.
    pub limits: Limits,
    /// The agent a sub-session runs as: its prompt follows the base rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentPrompt>,
    /// The session's MCP servers' own instructions, in server order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_instructions: Vec<crate::mcp::McpInstructions>,
    /// Text that ends the prompt so no earlier cached prefix is read (`[context]
    /// cache_breaker`, a debugging switch); None: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_breaker: Option<String>,
}

/// The part of a sub-session's prompt that makes it an agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AgentPrompt {
    /// The agent's name.
    pub name: String,
    /// Its prompt (an agent file's body, or the built-in explore prompt).
    pub prompt: String,
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            model: "unknown".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            features: Features::default(),
            facts: SessionFacts::default(),
            limits: Limits::default(),
            agent: None,
            mcp_instructions: Vec::new(),
            cache_breaker: None,
        }
    }
}

/// Character limits of the prompt's file-based parts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// One limit shared by all instruction files (GARUDA.md first, then AGENTS.md, CLAUDE.md).
    #[serde(alias = "instructionsChars")]
    pub instructions_chars: usize,
    /// Limit of the memory file.
    #[serde(alias = "memoryChars")]
    pub memory_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            instructions_chars: 40_000,
            memory_chars: 8_000,
        }
    }
}

/// Text read from a workspace file (possibly only its start).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FileText {
    /// The text read, invalid UTF-8 replaced.
    pub text: String,
    /// True when the file holds more than `text`.
    pub truncated: bool,
    /// The file's size on disk.
    pub total_bytes: u64,
    /// True when invalid UTF-8 was replaced.
    pub lossy: bool,
    /// The file's length in characters, when the whole file was read.
    pub total_chars: Option<u64>,
}

/// What reading a file gave.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Content {
    /// Its text.
    Text(FileText),
    /// It was not read; the reason.
    Skipped(String),
}

/// One instruction or memory file found in the root.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceFile {
    /// Root-relative name.
    pub name: String,
    /// The link's text, when the name is a link.
    pub link: Option<String>,
    /// What was read.
    pub content: Content,
}

/// Everything assembly needs from disk.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Gathered {
    /// The canonical root, as shown in the prompt.
    pub root: String,
    /// Root instruction files present, in [`sources::FILE_NAMES`] order.
    pub instructions: Vec<SourceFile>,
    /// Rule files of the enabled rule sources (always-on and path-scoped), by path.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The user-global instruction file (its name is its absolute path), when present.
    #[serde(default)]
    pub global: Option<SourceFile>,
    /// The limit of the user-global file.
    #[serde(default)]
    pub global_limit: usize,
    /// The memory file, when present.
    pub memory: Option<SourceFile>,
    /// Language profiles detected from the root's files.
    pub profiles: Vec<Profile>,
    /// Problems met while reading (links out of the root, unreadable files, bad UTF-8).
    pub warnings: Vec<String>,
}

/// What a part of the system prompt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartKind {
    /// Base rules and the identity line.
    Base,
    /// A sub-session's agent prompt.
    Agent,
    /// The optional feature lines.
    Features,
    /// `# Build and test (detected by Garuda)`.
    Build,
    /// `# Your instructions`: the user-global file.
    Global,
    /// `# Project instructions`: the instruction files.
    Instructions,
    /// `# Project memory`.
    Memory,
    /// `# MCP server instructions`: the servers' own text, marked untrusted.
    McpInstructions,
    /// `[cache breaker: …]`, the debugging switch that keeps any earlier cached prefix from
    /// being read.
    CacheBreaker,
}

/// Where one part lies in the system prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// What it is.
    pub kind: PartKind,
    /// Its byte range in `Assembled::system`.
    pub range: std::ops::Range<usize>,
}

/// The assembled system prompt and its report.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembled {
    /// The system prompt.
    pub system: String,
    /// Hex sha256 of `system`.
    pub sha256: String,
    /// One entry per part, and one per instruction file (also the skipped ones).
    pub sections: Vec<SectionReport>,
    /// Everything the user should know: skipped, cut, replaced, not followed.
    pub warnings: Vec<String>,
    /// The parts, in order, as typed ranges of `system`: consumers take the instructions or
    /// the memory from here, never by searching the rendered text.
    pub parts: Vec<Part>,
    /// Every instruction source found: the ones in this prompt, and the path-scoped rules
    /// that come into force when a matching path is touched.
    pub sources: Vec<SourceReport>,
    /// What each MCP server's instructions take in the prompt.
    pub mcp_instructions: Vec<mcp::McpInstructionsReport>,
}

/// What kind of instruction source a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// An instruction file at the workspace root.
    Root,
    /// The user's file for every project.
    Global,
    /// An instruction file in a subfolder.
    Nested,
    /// A rule file of another agent's format.
    Rule,
}

/// Where a source reaches the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// In the system prompt.
    System,
    /// In a `<garuda_note>` of a user message (nested files and path-scoped rules).
    Note,
}

/// One instruction source: where it comes from, what it governs, what it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceReport {
    /// Root-relative path (the user-global file: its absolute path).
    pub path: String,
    /// Root file, global file, nested file or rule.
    pub kind: SourceKind,
    /// What it governs: `.` (the whole project), a folder (`packages/a/`), the globs of a
    /// rule, or `every project` for the global file.
    pub scope: String,
    /// Where it reaches the model.
    pub placement: Placement,
    /// True when the model has it now.
    pub in_force: bool,
    /// Characters it takes (heading and cut note included; 0 when not in force).
    pub chars: u64,
    /// Estimated tokens.
    pub tokens: u64,
    /// True when it was cut to its limit.
    pub cut: bool,
    /// Characters left out when cut.
    pub missing_chars: Option<u64>,
    /// Why it is not used (empty, duplicate, outside the root, malformed frontmatter, …).
    pub skipped: Option<String>,
}

impl SourceReport {
    /// A report for a source whose text in the prompt or note is `text`.
    pub fn of(
        path: &str,
        kind: SourceKind,
        scope: String,
        placement: Placement,
        text: &str,
        cut: bool,
        missing_chars: Option<u64>,
    ) -> SourceReport {
        let chars = text.chars().count();
        SourceReport {
            path: path.to_string(),
            kind,
            scope,
            placement,
            in_force: true,
            chars: chars as u64,
            tokens: estimate_tokens(chars),
            cut,
            missing_chars,
            skipped: None,
        }
    }

    /// A source that is not used, and why (or not yet in force: `why` None).
    pub fn unused(
        path: &str,
        kind: SourceKind,
        scope: String,
        placement: Placement,
        why: Option<String>,
    ) -> SourceReport {
        SourceReport {
            path: path.to_string(),
            kind,
            scope,
            placement,
            in_force: false,
            chars: 0,
            tokens: 0,
            cut: false,
            missing_chars: None,
            skipped: why,
        }
    }
}

impl Assembled {
    /// The text of the part of `kind` (empty when the prompt has none).
    pub fn part(&self, kind: PartKind) -> &str {
        self.parts
            .iter()
            .find(|p| p.kind == kind)
            .and_then(|p| self.system.get(p.range.clone()))
            .unwrap_or("")
    }
}

/// What one part of the prompt holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SectionReport {
    /// "base", "features", "build", "instructions", "instructions:<file>" or "memory".
    pub kind: String,
    /// The file (or files) it comes from.
    pub source: Option<String>,
    /// Its size in the prompt, in bytes.
    pub bytes: usize,
    /// Estimated tokens.
    pub tokens: u64,
    /// True when a file was cut to its limit.
    pub cut: bool,
    /// Characters left out of a cut file (estimated from bytes when not all was read).
    pub missing_chars: Option<u64>,
    /// Why a file was left out.
    pub skipped: Option<String>,
}

/// A report for a part whose text is `text`.
pub(crate) fn report(
    kind: &str,
    source: Option<String>,
    text: &str,
    cut: bool,
    missing_chars: Option<u64>,
) -> SectionReport {
    SectionReport {
        kind: kind.to_string(),
        source,
        bytes: text.len(),
        tokens: estimate_tokens(text.chars().count()),
        cut,
        missing_chars,
        skipped: None,
    }
}

/// What [`gather_with`] reads besides the limits: the instruction sources and the
/// user-global file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatherSpec {
    /// `[instructions]`.
    pub settings: InstructionSettings,
    /// The user-global instruction file (`$XDG_CONFIG_HOME/garuda/AGENTS.md`), if any.
    pub global: Option<PathBuf>,
}

/// Reads the default instruction files, the memory file and the profile markers of `root`.
/// Each file is read with its budget only (a 2 GiB file costs at most the limit's bytes).
pub fn gather(root: &Root, limits: &Limits) -> Gathered {
    gather_with(root, limits, &GatherSpec::default())
}

/// Most rule files read from one rule folder.
const MAX_RULE_FILES: usize = 200;

/// Like [`gather`], with the sources of `spec`: the enabled root files, the rules of the
/// enabled rule sources, and the user-global file (read through a root of its own folder).
pub fn gather_with(root: &Root, limits: &Limits, spec: &GatherSpec) -> Gathered {
    let mut warnings = Vec::new();
    let mut instructions = Vec::new();
    let settings = &spec.settings;
    for name in settings.file_names() {
        if let Some(f) = read_source(root, name, limits.instructions_chars, &mut warnings) {
            instructions.push(f);
        }
    }
    let rule_chars = limits.instructions_chars.max(settings.nested_chars);
    let mut rules = Vec::new();
    let mut rule_files: Vec<(Source, String)> = Vec::new();
    if settings.has(Source::Copilot) {
        rule_files.push((Source::Copilot, sources::COPILOT_FILE.to_string()));
        for f in list_rule_files(root, ".github/instructions", ".instructions.md", 3) {
            rule_files.push((Source::Copilot, f));
        }
    }
    if settings.has(Source::Cursor) {
        for f in list_rule_files(root, ".cursor/rules", ".mdc", 0) {
            rule_files.push((Source::Cursor, f));
        }
    }
    if settings.has(Source::ClaudeRules) {
        for f in list_rule_files(root, ".claude/rules", ".md", 3) {
            rule_files.push((Source::ClaudeRules, f));
        }
    }
    for (source, name) in rule_files {
        if let Some(f) = read_source(root, &name, rule_chars, &mut warnings) {
            let (rule, warning) = sources::rule_from(source, f);
            warnings.extend(warning);
            if let Some(globs) = rule.globs() {
                let (_, errors) = sources::RuleMatcher::new(globs);
                for e in errors {
                    warnings.push(format!(
                        "{}: invalid glob {e}; it matches nothing",
                        rule.file.name
                    ));
                }
            }
            rules.push(rule);
        }
    }
    let global = spec
        .global
        .as_deref()
        .and_then(|p| read_global(p, settings.global_chars, &mut warnings));
    let memory = read_source(root, MEMORY_FILE, limits.memory_chars, &mut warnings);
    let profiles = profiles::detect(&Probe::read(root));
    Gathered {
        root: root.path().display().to_string(),
        instructions,
        rules,
        global,
        global_limit: settings.global_chars,
        memory,
        profiles,
        warnings,
    }
}

/// Files ending in `suffix` in `dir` (and its subfolders down to `depth`), sorted,
/// root-relative; at most [`MAX_RULE_FILES`]. Entries that are not folders are returned
/// whatever they are, so reading them reports links out of the root and the like.
fn list_rule_files(root: &Root, dir: &str, suffix: &str, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_string(), 0usize)];
    while let Some((d, level)) = stack.pop() {
        let Ok(entries) = root.list(Path::new(&d)) else {
            continue;
        };
        for e in entries {
            let rel = format!("{d}/{}", e.name);
            match e.kind {
                crate::fsroot::EntryKind::Dir if level < depth => stack.push((rel, level + 1)),
                crate::fsroot::EntryKind::Dir => {}
                _ if e.name.ends_with(suffix) && out.len() < MAX_RULE_FILES => out.push(rel),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// The user-global file, read through a root of its own folder (the same guarantees as a
/// workspace file: no FIFO hangs, its budget only). Absent folder or file: `None`.
fn read_global(path: &Path, max_chars: usize, warnings: &mut Vec<String>) -> Option<SourceFile> {
    let dir = path.parent()?;
    let name = path.file_name()?;
    let groot = Root::open(dir).ok()?;
    let mut w = Vec::new();
    let mut f = read_source(&groot, &name.to_string_lossy(), max_chars, &mut w)?;
    let shown = path.display().to_string();
    let prefix = format!("{}:", name.to_string_lossy());
    warnings.extend(w.into_iter().map(|w| match w.strip_prefix(&prefix) {
        Some(rest) => format!("{shown}:{rest}"),
        None => w,
    }));
    f.name = shown;
    Some(f)
}

/// Reads the instruction files of the subfolder `dir` (root-relative, not the root) named
/// `names`: the nested files of that folder, each within `max_chars`.
pub fn gather_dir(
    root: &Root,
    dir: &str,
    names: &[&str],
    max_chars: usize,
) -> (Vec<SourceFile>, Vec<String>) {
    let mut warnings = Vec::new();
    let files = names
        .iter()
        .filter_map(|n| read_source(root, &format!("{dir}/{n}"), max_chars, &mut warnings))
        .collect();
    (files, warnings)
}

/// Reads one file; `None` when it does not exist.
fn read_source(
    root: &Root,
    name: &str,
    max_chars: usize,
    warnings: &mut Vec<String>,
) -> Option<SourceFile> {
    let rel = Path::new(name);
    let link = root
        .read_link(rel)
        .ok()
        .flatten()
        .map(|l| l.display().to_string());
    let content = match root.read_text_counted(rel, max_chars) {
        Ok((r, total_chars)) => {
            if r.lossy {
                warnings.push(format!("{name}: invalid UTF-8 replaced with U+FFFD"));
            }
            Content::Text(FileText {
                text: r.text,
                truncated: r.truncated,
                total_bytes: r.total_bytes,
                lossy: r.lossy,
                total_chars,
            })
        }
        // A dangling link is as good as absent, unless it points out of the root.
        Err(FsError::NotFound(_)) => return None,
        Err(FsError::NotRegular { kind: "folder", .. }) => Content::Skipped("folder".into()),
        Err(FsError::NotRegular { kind, .. }) => {
            warnings.push(format!("{name}: not a regular file ({kind}); skipped"));
            Content::Skipped(format!("not a regular file ({kind})"))
        }
        Err(FsError::OutsideRoot(_)) => {
            let to = link
                .as_deref()
                .map(|l| format!(" (links to {l})"))
                .unwrap_or_default();
            warnings.push(format!(
                "{name}: leads outside the workspace root{to}; skipped, its content is not in \
                 the prompt"
            ));
            Content::Skipped("outside the workspace root".into())
        }
        Err(FsError::PermissionDenied(_)) => {
            warnings.push(format!("{name}: permission denied; skipped"));
            Content::Skipped("permission denied".into())
        }
        Err(e) => {
            warnings.push(format!("{e}; skipped"));
            Content::Skipped(e.to_string())
        }
    };
    Some(SourceFile {
        name: name.to_string(),
        link,
        content,
    })
}

/// Builds the system prompt from what was gathered. Pure and deterministic.
pub fn assemble(g: &Gathered, opts: &PromptOptions) -> Assembled {
    let mut parts: Vec<(PartKind, String)> = Vec::new();
    let mut sections = Vec::new();
    let mut warnings = g.warnings.clone();

    let base = base::base_section(&g.root, &opts.version, &opts.model);
    sections.push(report("base", None, &base, false, None));
    parts.push((PartKind::Base, base));

    if let Some(a) = &opts.agent {
        let text = agent_section(a);
        sections.push(report("agent", Some(a.name.clone()), &text, false, None));
        parts.push((PartKind::Agent, text));
    }

    let lines = features::feature_lines(&opts.facts);
    warnings.extend(features::omitted_lines(&opts.features, &opts.facts));
    if !lines.is_empty() {
        let text = format!("# Tools and environment\n\n- {}", lines.join("\n- "));
        sections.push(report("features", None, &text, false, None));
        parts.push((PartKind::Features, text));
    }

    if let Some(text) = profiles::build_section(&g.profiles) {
        let markers: Vec<&str> = g.profiles.iter().map(|p| p.marker.as_str()).collect();
        sections.push(report(
            "build",
            Some(markers.join(", ")),
            &text,
            false,
            None,
        ));
        parts.push((PartKind::Build, text));
    }

    let mut sources_out = Vec::new();
    if let Some(f) = &g.global {
        let r = instructions::render_global(f, g.global_limit);
        sections.extend(r.reports);
        warnings.extend(r.warnings);
        sources_out.extend(r.sources);
        if let Some(text) = r.text {
            parts.push((PartKind::Global, text));
        }
    }

    // The always-on rules join the root files, before Garuda's own file (the later wins).
    let mut files: Vec<SourceFile> = Vec::with_capacity(g.instructions.len() + g.rules.len());
    let garuda = g.instructions.iter().position(|f| f.name == "GARUDA.md");
    let (before, after) = g
        .instructions
        .split_at(garuda.unwrap_or(g.instructions.len()));
    files.extend(before.iter().cloned());
    files.extend(
        g.rules
            .iter()
            .filter(|r| r.applies == Applies::Always)
            .map(|r| r.file.clone()),
    );
    files.extend(after.iter().cloned());
    let ins = instructions::render(&files, opts.limits.instructions_chars);
    sections.extend(ins.reports);
    warnings.extend(ins.warnings);
    sources_out.extend(ins.sources);
    if let Some(text) = ins.text {
        parts.push((PartKind::Instructions, text));
    }
    for r in &g.rules {
        match &r.applies {
            Applies::Always => {}
            Applies::Paths(globs) => sources_out.push(SourceReport::unused(
                &r.file.name,
                SourceKind::Rule,
                globs.join(", "),
                Placement::Note,
                None,
            )),
            Applies::Never(why) => sources_out.push(SourceReport::unused(
                &r.file.name,
                SourceKind::Rule,
                String::new(),
                Placement::Note,
                Some(why.clone()),
            )),
        }
    }

    let (mem, mem_report, mem_warnings) =
        memory::render(g.memory.as_ref(), opts.limits.memory_chars);
    sections.extend(mem_report);
    warnings.extend(mem_warnings);
    if let Some(text) = mem {
        parts.push((PartKind::Memory, text));
    }

    // Last: the servers' text follows everything the user and the project wrote.
    let servers = mcp::render(&opts.mcp_instructions);
    if let Some(text) = servers.text {
        let names: Vec<&str> = servers.reports.iter().map(|r| r.server.as_str()).collect();
        let cut = servers.reports.iter().any(|r| r.cut);
        sections.push(report(
            "mcp_instructions",
            Some(names.join(", ")),
            &text,
            cut,
            None,
        ));
        parts.push((PartKind::McpInstructions, text));
    }

    // After everything, so the prompt's own bytes before it stay what they are.
    if let Some(b) = opts.cache_breaker.as_deref().filter(|b| !b.is_empty()) {
        parts.push((PartKind::CacheBreaker, format!("[cache breaker: {b}]")));
    }
    let (system, ranges) = join_parts(&parts);
    let sha256 = sha256_hex(&system);
    Assembled {
        system,
        sha256,
        sections,
        warnings,
        parts: ranges,
        sources: sources_out,
        mcp_instructions: servers.reports,
    }
}

/// The part of a sub-session's prompt that says it is an agent, and whose report its final
/// message is.
fn agent_section(a: &AgentPrompt) -> String {
    format!(
        "# Agent: {}\n\nAnother agent handed you a task: it is the user's message. Work on it \
         with your tools on your own (nobody answers questions), then end with one message \
         reporting what you found or did: that message is all the calling agent sees of your \
         work.\n\n{}",
        visible(&a.name),
        a.prompt.trim()
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The system prompt of `parts`, in order, a blank line between them and a newline at the
/// end, with where each part lies in it.
pub(crate) fn join_parts(parts: &[(PartKind, String)]) -> (String, Vec<Part>) {
    let mut system = String::new();
    let mut ranges = Vec::with_capacity(parts.len());
    for (i, (kind, text)) in parts.iter().enumerate() {
        if i > 0 {
            system.push_str("\n\n");
        }
        let start = system.len();
        system.push_str(text);
        ranges.push(Part {
            kind: *kind,
            range: start..system.len(),
        });
    }
    system.push('\n');
    (system, ranges)
}

/// Hex sha256 of a text (prompt and instruction versions).
pub fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}
