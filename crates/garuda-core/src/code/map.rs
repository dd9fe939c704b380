//! The repository map (pure): definitions ranked by how often the rest of the code uses
//! their name, cut to a token budget and written as an outline by file. The same index gives
//! the same bytes.

use std::collections::{BTreeMap, HashMap};

use super::index::IndexState;

/// The map's default budget, in tokens.
pub const DEFAULT_BUDGET: usize = 2048;

/// The map of the files under `prefix` (root-relative folder; empty: all) within `budget`
/// tokens: files by their most-used definition, each with its kept definitions in line order.
pub fn repo_map(st: &IndexState, prefix: &str, budget: usize) -> String {
    let prefix = prefix.trim_matches('/');
    let under = |p: &str| {
        prefix.is_empty()
            || prefix == "."
            || p.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'))
    };
    // Uses of each name per file, so a file's uses of its own names do not count.
    let mut uses: HashMap<&str, HashMap<&str, usize>> = HashMap::new();
    for (path, f) in &st.files {
        for r in &f.refs {
            *uses
                .entry(r.name.as_str())
                .or_default()
                .entry(path.as_str())
                .or_default() += 1;
        }
    }
    let score = |name: &str, path: &str| -> usize {
        uses.get(name)
            .map(|by| by.iter().filter(|(p, _)| **p != path).map(|(_, n)| n).sum())
            .unwrap_or(0)
    };
    // (score, path, index of the definition in its file)
    let mut ranked: Vec<(usize, &str, usize)> = Vec::new();
    for (path, f) in st.files.iter().filter(|(p, _)| under(p)) {
        for (i, d) in f.defs.iter().enumerate() {
            ranked.push((score(&d.name, path), path.as_str(), i));
        }
    }
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)).then(a.2.cmp(&b.2)));
    let budget_chars = budget.saturating_mul(4);
    let mut kept: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    let mut file_rank: Vec<&str> = Vec::new();
    let mut used = 0usize;
    let mut left_out = 0usize;
    for (s, path, i) in &ranked {
        let Some(d) = st.files.get(*path).and_then(|f| f.defs.get(*i)) else {
            continue;
        };
        let header = if kept.contains_key(path) {
            0
        } else {
            path.len() + 2
        };
        let line = d.signature.len() + 12;
        if used + header + line > budget_chars {
            left_out += 1;
            continue;
        }
        used += header + line;
        if header > 0 {
            file_rank.push(path);
        }
        kept.entry(path).or_default().push((*i, *s));
    }
    let mut out = String::new();
    for path in file_rank {
        out.push_str(path);
        out.push_str(":\n");
        let Some(f) = st.files.get(path) else {
            continue;
        };
        let mut defs = kept.remove(path).unwrap_or_default();
        defs.sort();
        for (i, s) in defs {
            let Some(d) = f.defs.get(i) else { continue };
            let uses = if s == 1 {
                "  [1 use]".to_string()
            } else if s > 1 {
                format!("  [{s} uses]")
            } else {
                String::new()
            };
            out.push_str(&format!("{:>5}│ {}{uses}\n", d.line, d.signature));
        }
    }
    if left_out > 0 {
        out.push_str(&format!(
            "[{left_out} less-used definitions left out for the budget of {budget} tokens; \
             give `path` for a folder or a larger `budget`]\n"
        ));
    }
    out
}
