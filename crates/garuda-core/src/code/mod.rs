//! The code index: each workspace's definitions and references in JavaScript, TypeScript,
//! Rust, Python and Go, read with tree-sitter grammars and their tags queries. Built off the
//! request loop when a workspace opens (`index.rs`), kept current from the watcher, bounded
//! in files, symbols and file size, root-confined; the look-ups (`query.rs`) and the
//! repository map (`map.rs`) are pure functions of what it holds.

mod index;
mod lang;
mod map;
mod parse;
mod query;

#[cfg(test)]
mod tests;

pub use index::{CodeIndex, IndexCaps, IndexState, Progress};
pub use lang::Lang;
pub use map::{DEFAULT_BUDGET, repo_map};
pub use parse::{Def, FileSymbols, Ref, parse};
pub use query::{DefHit, RefHit, find_references, find_symbol, name_at, render_defs, render_refs};

/// The source line of an answer from the index: how far it is while it builds.
pub fn index_source(st: &IndexState) -> String {
    let p = st.progress();
    let files = st.files.len();
    if p.done {
        let found = files + st.skipped();
        format!("garuda index ({files} of {found} files indexed)")
    } else {
        format!(
            "garuda index ({} of {} files indexed; still building, answers cover the files indexed so far)",
            p.indexed,
            p.total.max(p.indexed)
        )
    }
}
