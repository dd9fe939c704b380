//! System prompt assembly: a pure function of what was read from the workspace and the
//! session's options.
//!
//! [`gather`] does all the IO, through [`crate::fsroot::Root`]; [`assemble`] is pure and
//! deterministic: no time and no counters go into the prompt, so the same inputs give the
//! same bytes and the same sha256, and the provider's prompt cache stays valid.
//!
//! The parts, in order: base rules with the identity line, the optional feature lines,
//! `# Build and test (detected by Garuda)`, `# Project instructions`, `# Project memory`.

mod base;
mod features;
mod instructions;
mod memory;
mod profiles;
mod visible;

#[cfg(test)]
mod tests;

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fsroot::{FsError, Root};
use crate::message::estimate_tokens;

pub use features::{CodeIndex, Features, SessionFacts, UnknownFeature};
pub use instructions::split_budget;
pub use profiles::{Probe, Profile, detect as detect_profiles};
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
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            model: "unknown".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            features: Features::default(),
            facts: SessionFacts::default(),
            limits: Limits::default(),
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
    /// Instruction files present, in [`INSTRUCTION_FILES`] order.
    pub instructions: Vec<SourceFile>,
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
    /// The optional feature lines.
    Features,
    /// `# Build and test (detected by Garuda)`.
    Build,
    /// `# Project instructions`: the instruction files.
    Instructions,
    /// `# Project memory`.
    Memory,
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

/// Reads the instruction files, the memory file and the profile markers of `root`. Each
/// file is read with its budget only (a 2 GiB file costs at most the limit's bytes).
pub fn gather(root: &Root, limits: &Limits) -> Gathered {
    let mut warnings = Vec::new();
    let mut instructions = Vec::new();
    for name in INSTRUCTION_FILES {
        if let Some(f) = read_source(root, name, limits.instructions_chars, &mut warnings) {
            instructions.push(f);
        }
    }
    let memory = read_source(root, MEMORY_FILE, limits.memory_chars, &mut warnings);
    let profiles = profiles::detect(&Probe::read(root));
    Gathered {
        root: root.path().display().to_string(),
        instructions,
        memory,
        profiles,
        warnings,
    }
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

    let lines = features::feature_lines(&opts.features, &opts.facts);
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

    let ins = instructions::render(&g.instructions, opts.limits.instructions_chars);
    sections.extend(ins.reports);
    warnings.extend(ins.warnings);
    if let Some(text) = ins.text {
        parts.push((PartKind::Instructions, text));
    }

    let (mem, mem_report, mem_warnings) =
        memory::render(g.memory.as_ref(), opts.limits.memory_chars);
    sections.extend(mem_report);
    warnings.extend(mem_warnings);
    if let Some(text) = mem {
        parts.push((PartKind::Memory, text));
    }

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
    let sha256 = hex(&Sha256::digest(system.as_bytes()));
    Assembled {
        system,
        sha256,
        sections,
        warnings,
        parts: ranges,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
