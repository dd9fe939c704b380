//! Part 5: the project memory, facts saved with remember.

use super::instructions::{cut_note, missing, prefix};
use super::{Content, SectionReport, SourceFile, report};

/// The section heading.
const HEADING: &str = "# Project memory (.garuda/memory.md)";

/// Rendered memory section (when there is text), its report and warnings.
pub(crate) fn render(
    memory: Option<&SourceFile>,
    limit: usize,
) -> (Option<String>, Option<SectionReport>, Vec<String>) {
    let Some(f) = memory else {
        return (None, None, Vec::new());
    };
    let skipped = |reason: &str| SectionReport {
        kind: "memory".to_string(),
        source: Some(f.name.clone()),
        bytes: 0,
        tokens: 0,
        cut: false,
        missing_chars: None,
        skipped: Some(reason.to_string()),
    };
    let file = match &f.content {
        Content::Skipped(reason) => return (None, Some(skipped(reason)), Vec::new()),
        Content::Text(t) if t.text.trim().is_empty() && !t.truncated => {
            return (None, Some(skipped("empty")), Vec::new());
        }
        Content::Text(t) => t,
    };
    let body = prefix(&file.text, limit);
    let cut = file.truncated || body.len() < file.text.len();
    let mut text = format!(
        "{HEADING}\n\nThese facts were saved with remember in earlier sessions. They can be out \
         of date: check them against the code before you rely on them.\n\n{}",
        body.trim_end()
    );
    let mut warnings = Vec::new();
    let mut missing_chars = None;
    if cut {
        let (miss, exact) = missing(file, limit);
        missing_chars = Some(miss);
        text.push_str("\n\n");
        text.push_str(&cut_note(&f.name, limit, miss, exact, "project memory"));
        warnings.push(format!(
            "{}: cut to {limit} characters; {}{miss} characters missing",
            f.name,
            if exact { "" } else { "about " }
        ));
    }
    let rep = report("memory", Some(f.name.clone()), &text, cut, missing_chars);
    (Some(text), Some(rep), warnings)
}
