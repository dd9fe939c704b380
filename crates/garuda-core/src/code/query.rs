//! Look-ups over the index (pure): definitions by name, best match first, and the uses of a
//! name grouped by file; and how either is written for the model, whoever answered.

use std::collections::BTreeMap;

use super::index::IndexState;

/// A definition found, by the index or a client's language server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefHit {
    /// Root-relative path.
    pub path: String,
    /// First line, 1-based.
    pub line: u32,
    /// Last line, 1-based, when known.
    pub end_line: Option<u32>,
    /// Its kind (function, class, …).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// What it sits in.
    pub container: Option<String>,
    /// Its first line.
    pub signature: Option<String>,
}

/// A use found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefHit {
    /// Root-relative path.
    pub path: String,
    /// The line, 1-based.
    pub line: u32,
    /// The line's text.
    pub text: Option<String>,
    /// The definition it sits in, when known.
    pub enclosing: Option<String>,
}

/// How well a name matches: exact, then ignoring case, then containing the query.
fn rank(name: &str, query: &str, lower: &str) -> Option<u8> {
    if name == query {
        Some(0)
    } else if name.eq_ignore_ascii_case(query) {
        Some(1)
    } else if name.to_lowercase().contains(lower) {
        Some(2)
    } else {
        None
    }
}

/// Definitions named like `query` (of `kind` when given), best match first, then by path
/// and line; the total found and at most `limit` of them.
pub fn find_symbol(
    st: &IndexState,
    query: &str,
    kind: Option<&str>,
    limit: usize,
) -> (usize, Vec<DefHit>) {
    let lower = query.to_lowercase();
    let mut found: Vec<(u8, DefHit)> = Vec::new();
    for (path, file) in &st.files {
        for d in &file.defs {
            if kind.is_some_and(|k| !k.eq_ignore_ascii_case(d.kind)) {
                continue;
            }
            let Some(r) = rank(&d.name, query, &lower) else {
                continue;
            };
            found.push((
                r,
                DefHit {
                    path: path.clone(),
                    line: d.line,
                    end_line: Some(d.end_line),
                    kind: d.kind.to_string(),
                    name: d.name.clone(),
                    container: d.container.clone(),
                    signature: Some(d.signature.clone()),
                },
            ));
        }
    }
    // Stable: files are visited in path order and definitions in line order.
    found.sort_by_key(|(r, _)| *r);
    let total = found.len();
    (
        total,
        found.into_iter().take(limit).map(|(_, h)| h).collect(),
    )
}

/// The name a reference query means at `path`:`line`: a definition starting there, else a
/// use on it (the one named `name` when given).
pub fn name_at(st: &IndexState, path: &str, line: u32, name: Option<&str>) -> Option<String> {
    let file = st.files.get(path)?;
    let wanted = |n: &str| name.is_none_or(|w| w == n);
    file.defs
        .iter()
        .find(|d| d.line == line && wanted(&d.name))
        .map(|d| d.name.clone())
        .or_else(|| {
            file.refs
                .iter()
                .find(|r| r.line == line && wanted(&r.name))
                .map(|r| r.name.clone())
        })
}

/// The uses of `name` in path and line order; the total and at most `limit` of them.
pub fn find_references(st: &IndexState, name: &str, limit: usize) -> (usize, Vec<RefHit>) {
    let mut out = Vec::new();
    let mut total = 0;
    for (path, file) in &st.files {
        for r in file.refs.iter().filter(|r| r.name == name) {
            total += 1;
            if out.len() < limit {
                out.push(RefHit {
                    path: path.clone(),
                    line: r.line,
                    text: Some(r.text.clone()),
                    enclosing: r.enclosing.clone(),
                });
            }
        }
    }
    (total, out)
}

/// `find_symbol`'s answer: the source line, then one entry per definition.
pub fn render_defs(source: &str, query: &str, total: usize, hits: &[DefHit]) -> String {
    let mut out = format!("source: {source}\n");
    if hits.is_empty() {
        out.push_str(&format!("no definition matches {query:?}\n"));
        return out;
    }
    for h in hits {
        let span = match h.end_line {
            Some(e) if e > h.line => format!("{}-{e}", h.line),
            _ => h.line.to_string(),
        };
        out.push_str(&format!("{}:{span} {} {}", h.path, h.kind, h.name));
        if let Some(c) = &h.container {
            out.push_str(&format!(" (in {c})"));
        }
        out.push('\n');
        if let Some(s) = h.signature.as_deref().filter(|s| !s.is_empty()) {
            out.push_str(&format!("    {s}\n"));
        }
    }
    if total > hits.len() {
        out.push_str(&format!(
            "[{} of {total} shown; give `kind` or a more exact name]\n",
            hits.len()
        ));
    }
    out
}

/// `find_references`' answer: the source line, a count, then the sites grouped by file.
pub fn render_refs(source: &str, name: &str, total: usize, hits: &[RefHit]) -> String {
    let mut out = format!("source: {source}\n");
    if hits.is_empty() {
        out.push_str(&format!("no references to {name:?} found\n"));
        return out;
    }
    let mut by_file: BTreeMap<&str, Vec<&RefHit>> = BTreeMap::new();
    for h in hits {
        by_file.entry(&h.path).or_default().push(h);
    }
    let files = by_file.len();
    out.push_str(&format!(
        "{total} reference{} to {name} in {files} file{}{}\n",
        if total == 1 { "" } else { "s" },
        if files == 1 { "" } else { "s" },
        if total > hits.len() {
            format!(" ({} shown)", hits.len())
        } else {
            String::new()
        }
    ));
    for (path, sites) in by_file {
        out.push_str(&format!("{path}\n"));
        for h in sites {
            out.push_str(&format!(
                "  {}: {}",
                h.line,
                h.text.as_deref().unwrap_or("")
            ));
            if let Some(e) = &h.enclosing {
                out.push_str(&format!("  (in {e})"));
            }
            out.push('\n');
        }
    }
    out
}
