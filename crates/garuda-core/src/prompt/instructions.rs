//! Part 4: the project instruction files, their shared budget, and the cut notes.

use super::{
    Content, FileText, Placement, SectionReport, SourceFile, SourceKind, SourceReport, report,
};

/// The order in which instruction files get their share of the limit: the file named for
/// Garuda first, the shared AGENTS.md next, CLAUDE.md, GEMINI.md, then the always-on rules.
const PRIORITY: [&str; 4] = ["GARUDA.md", "AGENTS.md", "CLAUDE.md", "GEMINI.md"];

/// Splits `limit` characters among files whose sizes are given in priority order: each
/// gets what it needs while something is left. The total never exceeds `limit`.
pub fn split_budget(sizes: &[usize], limit: usize) -> Vec<usize> {
    let mut left = limit;
    sizes
        .iter()
        .map(|&size| {
            let give = size.min(left);
            left -= give;
            give
        })
        .collect()
}

/// The first `n` characters of `s`, borrowed.
pub(crate) fn prefix(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s; // never more characters than bytes
    }
    // Counting lead bytes is much faster than decoding every character.
    let mut count = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        if b & 0xC0 != 0x80 {
            if count == n {
                return &s[..i];
            }
            count += 1;
        }
    }
    s
}

fn priority(name: &str) -> usize {
    PRIORITY
        .iter()
        .position(|p| *p == name)
        .unwrap_or(PRIORITY.len())
}

/// Lines (outside code fences) that start with `@` and a path-like word: Claude-style
/// imports, which Garuda does not follow.
pub(crate) fn find_imports(text: &str) -> Vec<String> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let Some(rest) = t.strip_prefix('@') else {
            continue;
        };
        let word = rest.split_whitespace().next().unwrap_or("");
        let path_like = word
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '/' | '~' | '_'))
            && (word.contains('/') || word.contains('.'));
        if path_like {
            out.push(format!("@{word}"));
        }
    }
    out
}

/// How much of a file is missing after keeping `kept` characters of `f`, and whether the
/// count is exact (the whole file was read) or estimated from its size in bytes.
pub(crate) fn missing(f: &FileText, kept: usize) -> (u64, bool) {
    let read_chars = f.text.chars().count();
    if let Some(total) = f.total_chars {
        return (total.saturating_sub(kept.min(read_chars) as u64), true);
    }
    if !f.truncated {
        return ((read_chars.saturating_sub(kept)) as u64, true);
    }
    let kept_bytes = prefix(&f.text, kept).len();
    (f.total_bytes.saturating_sub(kept_bytes as u64), false)
}

/// The note a cut file ends with.
pub(crate) fn cut_note(name: &str, limit: usize, missing: u64, exact: bool, what: &str) -> String {
    let about = if exact { "" } else { "about " };
    format!(
        "[Garuda: {name} was cut here to fit the {limit}-character limit for {what}; \
         {about}{missing} characters are missing. Read the file for the rest.]"
    )
}

/// What happened to one file on its way into the section.
enum Fate<'a> {
    Skip(String),
    Keep { file: &'a FileText },
}

/// The rendered section (when any file goes in), the reports (section first, then one per
/// file) and the warnings of assembly.
pub(crate) struct Rendered {
    pub text: Option<String>,
    pub reports: Vec<SectionReport>,
    pub warnings: Vec<String>,
    pub sources: Vec<SourceReport>,
}

/// The kind of a file of the system prompt's instructions part.
fn kind_of(name: &str) -> SourceKind {
    if PRIORITY.contains(&name) {
        SourceKind::Root
    } else {
        SourceKind::Rule
    }
}

/// Builds `# Project instructions` from the gathered files (already in display order).
pub(crate) fn render(files: &[SourceFile], limit: usize) -> Rendered {
    let mut warnings = Vec::new();
    // Skip what cannot or need not go in; duplicates compare with files kept earlier.
    let mut fates: Vec<Fate> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let fate = match &f.content {
            Content::Skipped(reason) => Fate::Skip(reason.clone()),
            Content::Text(t) if t.text.trim().is_empty() && !t.truncated => {
                Fate::Skip("empty".to_string())
            }
            Content::Text(t) => {
                let dup = files[..i]
                    .iter()
                    .zip(&fates)
                    .find_map(|(e, fate)| match fate {
                        Fate::Keep { file } if *file == t => Some(e.name.clone()),
                        _ => None,
                    });
                match dup {
                    Some(first) => {
                        let why = match &f.link {
                            Some(link) => {
                                format!("duplicate of {first} ({} links to {link})", f.name)
                            }
                            None => format!("duplicate of {first}"),
                        };
                        Fate::Skip(why)
                    }
                    None => Fate::Keep { file: t },
                }
            }
        };
        fates.push(fate);
    }

    // One shared limit, handed out in priority order.
    let mut order: Vec<usize> = (0..files.len())
        .filter(|&i| matches!(fates[i], Fate::Keep { .. }))
        .collect();
    order.sort_by_key(|&i| (priority(&files[i].name), i));
    let sizes: Vec<usize> = order
        .iter()
        .map(|&i| match fates[i] {
            Fate::Keep { file } => file.text.chars().count(),
            Fate::Skip(_) => 0,
        })
        .collect();
    let grants = split_budget(&sizes, limit);
    let mut allot = vec![0usize; files.len()];
    for (&i, &g) in order.iter().zip(&grants) {
        allot[i] = g;
    }

    let kept: Vec<usize> = (0..files.len())
        .filter(|&i| matches!(fates[i], Fate::Keep { .. }))
        .collect();
    let several = kept.len() > 1;
    let mut file_reports = Vec::new();
    let mut sources = Vec::new();
    let mut parts = Vec::new();
    let mut any_cut = false;
    for (i, f) in files.iter().enumerate() {
        let file = match &fates[i] {
            Fate::Skip(reason) => {
                sources.push(SourceReport::unused(
                    &f.name,
                    kind_of(&f.name),
                    ".".into(),
                    Placement::System,
                    Some(reason.clone()),
                ));
                file_reports.push(SectionReport {
                    kind: format!("instructions:{}", f.name),
                    source: Some(f.name.clone()),
                    bytes: 0,
                    tokens: 0,
                    cut: false,
                    missing_chars: None,
                    skipped: Some(reason.clone()),
                });
                continue;
            }
            Fate::Keep { file } => *file,
        };
        let imports = find_imports(&file.text);
        if !imports.is_empty() {
            let mut shown: Vec<&str> = imports.iter().take(5).map(String::as_str).collect();
            let more = imports.len().saturating_sub(5);
            let extra = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            shown.dedup();
            warnings.push(format!(
                "{}: names other files with @ ({}{extra}); Garuda does not read @imports, so \
                 their content is not in the prompt",
                f.name,
                shown.join(", ")
            ));
        }
        let take = allot[i];
        let body = prefix(&file.text, take);
        let cut = body.len() < file.text.len() || file.truncated;
        let mut part = String::new();
        if several {
            part.push_str(&format!("## {}\n\n", f.name));
        }
        part.push_str(body.trim_end());
        let mut missing_chars = None;
        if cut {
            any_cut = true;
            let (miss, exact) = missing(file, take);
            missing_chars = Some(miss);
            if !body.trim().is_empty() {
                part.push_str("\n\n");
            }
            part.push_str(&cut_note(
                &f.name,
                limit,
                miss,
                exact,
                "project instructions",
            ));
            warnings.push(format!(
                "{}: cut to {take} characters (shared limit {limit}); {}{miss} characters missing",
                f.name,
                if exact { "" } else { "about " }
            ));
        }
        file_reports.push(report(
            &format!("instructions:{}", f.name),
            Some(f.name.clone()),
            &part,
            cut,
            missing_chars,
        ));
        sources.push(SourceReport::of(
            &f.name,
            kind_of(&f.name),
            ".".into(),
            Placement::System,
            &part,
            cut,
            missing_chars,
        ));
        parts.push(part);
    }

    if parts.is_empty() {
        return Rendered {
            text: None,
            reports: file_reports,
            warnings,
            sources,
        };
    }
    let names: Vec<&str> = kept.iter().map(|&i| files[i].name.as_str()).collect();
    let mut text = format!("# Project instructions ({})\n\n", names.join(", "));
    if several {
        text.push_str(
            "These files come in this order; where they conflict, the later file wins.\n\n",
        );
    }
    text.push_str(&parts.join("\n\n"));
    let mut reports = vec![report(
        "instructions",
        Some(names.join(", ")),
        &text,
        any_cut,
        None,
    )];
    reports.extend(file_reports);
    Rendered {
        text: Some(text),
        reports,
        warnings,
        sources,
    }
}

/// The user-global file's part: `# Your instructions (<path>)`, within its own limit.
pub(crate) fn render_global(f: &SourceFile, limit: usize) -> Rendered {
    let scope = "every project".to_string();
    let skip = |why: &str| Rendered {
        text: None,
        reports: vec![SectionReport {
            kind: "global".into(),
            source: Some(f.name.clone()),
            bytes: 0,
            tokens: 0,
            cut: false,
            missing_chars: None,
            skipped: Some(why.to_string()),
        }],
        warnings: Vec::new(),
        sources: vec![SourceReport::unused(
            &f.name,
            SourceKind::Global,
            scope.clone(),
            Placement::System,
            Some(why.to_string()),
        )],
    };
    let file = match &f.content {
        Content::Skipped(reason) => return skip(reason),
        Content::Text(t) if t.text.trim().is_empty() && !t.truncated => return skip("empty"),
        Content::Text(t) => t,
    };
    let body = prefix(&file.text, limit);
    let cut = file.truncated || body.len() < file.text.len();
    let mut text = format!(
        "# Your instructions ({})\n\nThe user keeps these instructions for every project. The \
         project's own instructions below win where they conflict.\n\n{}",
        f.name,
        body.trim_end()
    );
    let mut warnings = Vec::new();
    let mut missing_chars = None;
    if cut {
        let (miss, exact) = missing(file, limit);
        missing_chars = Some(miss);
        text.push_str("\n\n");
        text.push_str(&cut_note(
            &f.name,
            limit,
            miss,
            exact,
            "your own instructions",
        ));
        warnings.push(format!(
            "{}: cut to {limit} characters; {}{miss} characters missing",
            f.name,
            if exact { "" } else { "about " }
        ));
    }
    Rendered {
        reports: vec![report(
            "global",
            Some(f.name.clone()),
            &text,
            cut,
            missing_chars,
        )],
        sources: vec![SourceReport::of(
            &f.name,
            SourceKind::Global,
            scope,
            Placement::System,
            &text,
            cut,
            missing_chars,
        )],
        text: Some(text),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(name: &str, body: &str) -> SourceFile {
        SourceFile {
            name: name.to_string(),
            link: None,
            content: Content::Text(FileText {
                text: body.to_string(),
                truncated: false,
                total_bytes: body.len() as u64,
                lossy: false,
                total_chars: Some(body.chars().count() as u64),
            }),
        }
    }

    proptest! {
        #[test]
        fn split_never_exceeds_limit_and_respects_priority(
            sizes in proptest::collection::vec(0usize..100_000, 0..6),
            limit in 0usize..120_000,
        ) {
            let grants = split_budget(&sizes, limit);
            prop_assert_eq!(grants.len(), sizes.len());
            prop_assert!(grants.iter().sum::<usize>() <= limit);
            for (i, (&g, &s)) in grants.iter().zip(&sizes).enumerate() {
                prop_assert!(g <= s);
                // A later file gets something only when every earlier one got all it needed.
                if g > 0 {
                    for j in 0..i {
                        prop_assert_eq!(grants[j], sizes[j]);
                    }
                }
            }
            // Nothing is left unused while a file still wants more.
            if sizes.iter().sum::<usize>() >= limit {
                prop_assert_eq!(grants.iter().sum::<usize>(), limit);
            }
        }

        #[test]
        fn rendered_instructions_respect_the_limit(
            a in 0usize..3000, c in 0usize..3000, g in 0usize..3000, limit in 0usize..5000,
        ) {
            // Letters that never occur in Garuda's own text, so they count file bodies only.
            let files = vec![
                text("AGENTS.md", &"α".repeat(a)),
                text("CLAUDE.md", &"γ".repeat(c)),
                text("GARUDA.md", &"ω".repeat(g)),
            ];
            let r = render(&files, limit);
            let out = r.text.unwrap_or_default();
            let count = |ch: char| out.chars().filter(|&x| x == ch).count();
            let (ka, kc, kg) = (count('α'), count('γ'), count('ω'));
            prop_assert!(ka + kc + kg <= limit);
            prop_assert_eq!(kg, g.min(limit));
            prop_assert_eq!(ka, a.min(limit - kg));
            prop_assert_eq!(kc, c.min(limit - kg - ka));
            // Every file that lost characters says so.
            for (name, want, got) in [("AGENTS.md", a, ka), ("CLAUDE.md", c, kc), ("GARUDA.md", g, kg)] {
                let rep = r.reports.iter().find(|x| x.kind == format!("instructions:{name}")).unwrap();
                if want > 0 {
                    prop_assert_eq!(rep.cut, got < want);
                    prop_assert_eq!(rep.missing_chars, (got < want).then_some((want - got) as u64));
                } else {
                    prop_assert_eq!(rep.skipped.as_deref(), Some("empty"));
                }
            }
        }
    }

    proptest! {
        #[test]
        fn prefix_matches_char_take(s in any::<String>(), n in 0usize..64) {
            let want: String = s.chars().take(n).collect();
            prop_assert_eq!(prefix(&s, n), want.as_str());
        }
    }

    #[test]
    fn imports_are_found_outside_fences() {
        let t = "Intro\n@docs/style.md\n  @AGENTS.md rest\n@param x\n```\n@inside/code.md\n```\nmail@x.org\n";
        assert_eq!(find_imports(t), vec!["@docs/style.md", "@AGENTS.md"]);
    }

    #[test]
    fn missing_counts() {
        let f = FileText {
            text: "abcdef".into(),
            truncated: false,
            total_bytes: 6,
            lossy: false,
            total_chars: None,
        };
        assert_eq!(missing(&f, 4), (2, true));
        let f = FileText {
            text: "abcdef".into(),
            truncated: true,
            total_bytes: 100,
            lossy: false,
            total_chars: None,
        };
        assert_eq!(missing(&f, 4), (96, false));
        let f = FileText {
            total_chars: Some(50),
            ..f
        };
        assert_eq!(missing(&f, 4), (46, true));
    }
}
