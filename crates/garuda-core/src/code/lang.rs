//! The languages the index reads: a grammar and its tags query per language, compiled once.

use std::path::Path;
use std::sync::OnceLock;

use tree_sitter::{Language, Query};

/// A language the code index parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lang {
    /// JavaScript (and JSX).
    JavaScript,
    /// TypeScript.
    TypeScript,
    /// TypeScript with JSX.
    Tsx,
    /// Rust.
    Rust,
    /// Python.
    Python,
    /// Go.
    Go,
}

/// Every language, for compiling the queries in one place.
const ALL: [Lang; 6] = [
    Lang::JavaScript,
    Lang::TypeScript,
    Lang::Tsx,
    Lang::Rust,
    Lang::Python,
    Lang::Go,
];

impl Lang {
    /// The language of a file by its extension.
    pub fn of(path: &Path) -> Option<Lang> {
        let ext = path.extension()?.to_str()?;
        Some(match ext {
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "go" => Lang::Go,
            _ => return None,
        })
    }

    fn grammar(self) -> Language {
        match self {
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }

    /// The grammar's own tags query; TypeScript's only adds to JavaScript's (its grammar
    /// extends JavaScript's), so both are read for it, as the tags CLI does.
    fn tags_source(self) -> String {
        match self {
            Lang::JavaScript => tree_sitter_javascript::TAGS_QUERY.to_string(),
            Lang::TypeScript | Lang::Tsx => format!(
                "{}\n{}",
                without_export_constant(tree_sitter_javascript::TAGS_QUERY),
                tree_sitter_typescript::TAGS_QUERY
            ),
            Lang::Rust => format!("{}\n{RUST_USES}", tree_sitter_rust::TAGS_QUERY),
            Lang::Python => tree_sitter_python::TAGS_QUERY.to_string(),
            Lang::Go => tree_sitter_go::TAGS_QUERY.to_string(),
        }
    }

    /// The grammar and its compiled tags query (compiled once per process; `None` when a
    /// grammar's query does not compile against it, which the tests rule out).
    pub(crate) fn tags(self) -> Option<&'static (Language, Query)> {
        static TAGS: OnceLock<Vec<Option<(Language, Query)>>> = OnceLock::new();
        let all = TAGS.get_or_init(|| {
            ALL.iter()
                .map(|l| {
                    let language = l.grammar();
                    match Query::new(&language, &l.tags_source()) {
                        Ok(q) => Some((language, q)),
                        Err(e) => {
                            tracing::warn!("the {l:?} tags query does not compile: {e}");
                            None
                        }
                    }
                })
                .collect()
        });
        let i = ALL.iter().position(|l| *l == self)?;
        all.get(i)?.as_ref()
    }
}

/// Uses Rust's own query leaves out: calls of associated functions (`Config::new`) and
/// types named in signatures and expressions, which the repository map ranks by.
const RUST_USES: &str = "
(call_expression function: (scoped_identifier name: (identifier) @name)) @reference.call
(type_identifier) @name @reference.type
";

/// JavaScript's tags query without its last pattern (`export_statement value:`), a field
/// TypeScript's grammar does not have.
fn without_export_constant(q: &str) -> &str {
    match q.find("(export_statement value:") {
        Some(i) => &q[..i],
        None => q,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tags_query_compiles_against_its_grammar() {
        for l in ALL {
            assert!(l.tags().is_some(), "{l:?}");
        }
    }
}
