//! One file's definitions and references, from its grammar's tags query (pure: text in,
//! symbols out).

use std::collections::HashMap;

use tree_sitter::{Node, Parser, QueryCursor, StreamingIterator};

use super::lang::Lang;

/// The longest signature or context line kept, in characters.
const LINE_CHARS: usize = 160;

/// A definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    /// Its name.
    pub name: String,
    /// What it is: function, method, class, struct, enum, interface, trait, type, module,
    /// constant, macro.
    pub kind: &'static str,
    /// The definition (or Rust `impl` type, Go receiver type) it sits in.
    pub container: Option<String>,
    /// First line, 1-based.
    pub line: u32,
    /// Last line, 1-based.
    pub end_line: u32,
    /// Its first line, trimmed and cut.
    pub signature: String,
}

/// A use of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// The name used.
    pub name: String,
    /// The line, 1-based.
    pub line: u32,
    /// The innermost definition it sits in.
    pub enclosing: Option<String>,
    /// The line's text, trimmed and cut.
    pub text: String,
}

/// What the index keeps of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSymbols {
    /// Its language.
    pub lang: Lang,
    /// Definitions in source order.
    pub defs: Vec<Def>,
    /// References in source order.
    pub refs: Vec<Ref>,
}

impl FileSymbols {
    /// How many symbols it holds (the index's memory cap counts these).
    pub fn len(&self) -> usize {
        self.defs.len() + self.refs.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A definition found, with the byte range the container and enclosing look-ups need.
struct Found {
    def: Def,
    start: usize,
    end: usize,
    name_start: usize,
}

/// The definitions and references of `text` in `lang`; a file the grammar cannot read
/// yields what it could (tree-sitter recovers from errors).
pub fn parse(lang: Lang, text: &str) -> FileSymbols {
    let mut out = FileSymbols {
        lang,
        defs: Vec::new(),
        refs: Vec::new(),
    };
    let Some((language, query)) = lang.tags() else {
        return out;
    };
    let mut parser = Parser::new();
    if parser.set_language(language).is_err() {
        return out;
    }
    let Some(tree) = parser.parse(text, None) else {
        return out;
    };
    let src = text.as_bytes();
    let lines: Vec<&str> = text.lines().collect();
    let line_of = |row: usize| cut(lines.get(row).copied().unwrap_or("").trim());
    let names = query.capture_names();
    let mut defs: Vec<Found> = Vec::new();
    let mut by_node: HashMap<usize, usize> = HashMap::new();
    let mut refs: Vec<(Ref, usize)> = Vec::new();
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(query, tree.root_node(), src);
    while let Some(m) = matches.next() {
        let mut name: Option<Node> = None;
        let mut tag: Option<(&str, Node)> = None;
        for c in m.captures {
            let cname = names.get(c.index as usize).copied().unwrap_or("");
            if cname == "name" {
                name = Some(c.node);
            } else if cname.starts_with("definition.") || cname.starts_with("reference.") {
                tag = Some((cname, c.node));
            }
        }
        let (Some(name), Some((tag, node))) = (name, tag) else {
            continue;
        };
        let Ok(text) = name.utf8_text(src) else {
            continue;
        };
        if text.is_empty() || text.len() > 200 {
            continue;
        }
        if let Some(kind) = tag.strip_prefix("definition.") {
            let kind = refine(kind, node);
            let def = Def {
                name: text.to_string(),
                kind,
                container: None,
                line: node.start_position().row as u32 + 1,
                end_line: node.end_position().row as u32 + 1,
                signature: line_of(node.start_position().row),
            };
            match by_node.get(&node.id()) {
                // Rust's query finds a method twice: as a method and as a function.
                Some(&i) => {
                    if kind == "method"
                        && let Some(f) = defs.get_mut(i)
                    {
                        f.def.kind = kind;
                    }
                }
                None => {
                    by_node.insert(node.id(), defs.len());
                    defs.push(Found {
                        def,
                        start: node.start_byte(),
                        end: node.end_byte(),
                        name_start: name.start_byte(),
                    });
                }
            }
        } else {
            let r = Ref {
                name: text.to_string(),
                line: name.start_position().row as u32 + 1,
                enclosing: None,
                text: line_of(name.start_position().row),
            };
            refs.push((r, name.start_byte()));
        }
    }
    let spans: Vec<(usize, usize, String)> = defs
        .iter()
        .map(|f| (f.start, f.end, f.def.name.clone()))
        .collect();
    let innermost = |at: usize| -> Option<String> {
        spans
            .iter()
            .filter(|(s, e, _)| *s <= at && at < *e)
            .min_by_key(|(s, e, _)| e - s)
            .map(|(_, _, n)| n.clone())
    };
    // Containers: the innermost enclosing definition, else a Rust impl's or Go receiver's type.
    let root = tree.root_node();
    let kinds: HashMap<usize, &'static str> = defs.iter().map(|f| (f.start, f.def.kind)).collect();
    for f in &mut defs {
        let outer = spans
            .iter()
            .filter(|(s, e, _)| *s <= f.name_start && f.name_start < *e && *s != f.start)
            .min_by_key(|(s, e, _)| e - s);
        f.def.container = outer.map(|(_, _, n)| n.clone()).or_else(|| {
            root.descendant_for_byte_range(f.start, f.start)
                .and_then(|n| owner_type(n, src))
        });
        // Python's query calls every `def` a function: one in a class is a method.
        let in_type = outer
            .and_then(|(s, _, _)| kinds.get(s))
            .is_some_and(|k| matches!(*k, "class" | "struct" | "interface" | "trait"));
        if f.def.kind == "function" && in_type {
            f.def.kind = "method";
        }
    }
    // A definition's own name (Go's query tags every type name as a use) is not a use.
    // Two patterns may tag one use (TypeScript adds to JavaScript's `new` pattern).
    let mut seen: std::collections::HashSet<usize> = defs.iter().map(|f| f.name_start).collect();
    for (mut r, at) in refs {
        if !seen.insert(at) {
            continue;
        }
        r.enclosing = innermost(at);
        out.refs.push(r);
    }
    defs.sort_by_key(|f| f.start);
    out.defs = defs.into_iter().map(|f| f.def).collect();
    out
}

/// The tag's kind made exact by the node (Rust's query calls structs and enums classes).
fn refine(kind: &str, node: Node) -> &'static str {
    match node.kind() {
        "struct_item" => "struct",
        "enum_item" => "enum",
        "union_item" => "union",
        "type_item" | "type_alias_declaration" => "type",
        "trait_item" => "trait",
        "interface_declaration" => "interface",
        "type_spec" => match node.child_by_field_name("type").map(|t| t.kind()) {
            Some("struct_type") => "struct",
            Some("interface_type") => "interface",
            _ => "type",
        },
        _ => match kind {
            "function" => "function",
            "method" => "method",
            "class" => "class",
            "interface" => "interface",
            "module" => "module",
            "constant" => "constant",
            "macro" => "macro",
            "type" => "type",
            _ => "symbol",
        },
    }
}

/// The type a method belongs to when no definition encloses it: a Rust `impl`'s type, a Go
/// method's receiver type.
fn owner_type(mut n: Node, src: &[u8]) -> Option<String> {
    loop {
        match n.kind() {
            "impl_item" => {
                let t = n.child_by_field_name("type")?;
                return t.utf8_text(src).ok().map(cut);
            }
            "method_declaration" => {
                let recv = n.child_by_field_name("receiver")?;
                let text = recv.utf8_text(src).ok()?;
                // `(s *Server)` → `Server`.
                let ty = text
                    .trim_matches(|c| c == '(' || c == ')')
                    .split_whitespace()
                    .last()?
                    .trim_start_matches('*');
                return Some(ty.to_string());
            }
            _ => n = n.parent()?,
        }
    }
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(LINE_CHARS) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}
