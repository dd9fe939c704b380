use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::fsroot::Root;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/code")
}

fn index_of(dir: &Path) -> CodeIndex {
    let idx = CodeIndex::new(Arc::new(Root::open(dir).unwrap()), IndexCaps::default());
    idx.build();
    idx
}

/// `kind name line-end (container)` for each definition of `rel`.
fn defs(idx: &CodeIndex, rel: &str) -> Vec<String> {
    let st = idx.read();
    st.files[rel]
        .defs
        .iter()
        .map(|d| {
            let c = d
                .container
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            format!("{} {} {}-{}{c}", d.kind, d.name, d.line, d.end_line)
        })
        .collect()
}

/// `name line (enclosing)` for each reference of `rel`.
fn refs(idx: &CodeIndex, rel: &str) -> Vec<String> {
    let st = idx.read();
    st.files[rel]
        .refs
        .iter()
        .map(|r| {
            let e = r
                .enclosing
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            format!("{} {}{e}", r.name, r.line)
        })
        .collect()
}

#[test]
fn typescript_definitions_and_references() {
    let idx = index_of(&fixtures().join("ts"));
    assert_eq!(
        defs(&idx, "src/greeter.ts"),
        [
            "interface Greeting 1-3",
            "class Greeter 5-9",
            "method greet 6-8 (Greeter)",
            "function formatName 11-13",
        ]
    );
    assert_eq!(
        refs(&idx, "src/main.ts"),
        [
            "Greeter 4 (main)",
            "log 5 (main)",
            "greet 5 (main)",
            "log 6 (main)",
            "formatName 6 (main)",
            "main 9",
        ]
    );
    assert_eq!(defs(&idx, "src/view.tsx"), ["function Badge 3-3"]);
    assert_eq!(refs(&idx, "src/view.tsx"), ["formatName 3 (Badge)"]);
}

#[test]
fn javascript_definitions_and_references() {
    let idx = index_of(&fixtures().join("js"));
    assert_eq!(
        defs(&idx, "app.js"),
        [
            "class Store 1-5",
            "method load 2-4 (Store)",
            "function readKey 7-9",
            "function render 11-11",
        ]
    );
    assert_eq!(
        refs(&idx, "app.js"),
        [
            "readKey 3 (load)",
            "toUpperCase 8 (readKey)",
            "Store 11 (render)",
            "load 11 (render)",
        ]
    );
}

#[test]
fn rust_definitions_and_references() {
    let idx = index_of(&fixtures().join("rust"));
    assert_eq!(
        defs(&idx, "src/lib.rs"),
        [
            "struct Config 1-3",
            "enum Mode 5-8",
            "trait Load 10-12",
            "method new 15-17 (Config)",
            "function normalize 20-22",
            "function build 24-26",
        ]
    );
    let r = refs(&idx, "src/lib.rs");
    assert!(r.contains(&"normalize 16 (new)".to_string()), "{r:?}");
    assert!(r.contains(&"new 25 (build)".to_string()), "{r:?}");
    assert!(r.contains(&"Config 24 (build)".to_string()), "{r:?}");
    // The struct's own name is a definition, not a use.
    assert!(!r.iter().any(|x| x.starts_with("Config 1 ")), "{r:?}");
}

#[test]
fn python_definitions_and_references() {
    let idx = index_of(&fixtures().join("python"));
    assert_eq!(
        defs(&idx, "pkg/models.py"),
        [
            "constant LIMIT 1-1",
            "class Account 4-6",
            "method deposit 5-6 (Account)",
            "function check 9-10",
        ]
    );
    assert_eq!(
        refs(&idx, "pkg/run.py"),
        ["Account 5 (main)", "deposit 6 (main)", "check 7 (main)"]
    );
}

#[test]
fn go_definitions_and_references() {
    let idx = index_of(&fixtures().join("go"));
    assert_eq!(
        defs(&idx, "server.go"),
        [
            "struct Server 3-5",
            "interface Handler 7-9",
            "method Start 11-13 (Server)",
            "function listen 15-17",
            "function New 19-23",
        ]
    );
    let r = refs(&idx, "server.go");
    assert!(r.contains(&"listen 12 (Start)".to_string()), "{r:?}");
    assert!(r.contains(&"Start 21 (New)".to_string()), "{r:?}");
}

#[test]
fn find_symbol_puts_exact_then_case_insensitive_then_contained() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.ts"),
        "function formatNameLong() {}\nfunction FORMATNAME() {}\nfunction formatName() {}\n",
    )
    .unwrap();
    let idx = index_of(dir.path());
    let (total, hits) = find_symbol(&idx.read(), "formatName", None, 10);
    assert_eq!(total, 3);
    let names: Vec<_> = hits.iter().map(|h| (h.name.as_str(), h.line)).collect();
    assert_eq!(
        names,
        [("formatName", 3), ("FORMATNAME", 2), ("formatNameLong", 1)]
    );
    // A kind narrows; a limit cuts and the total says so.
    let (_, hits) = find_symbol(&idx.read(), "format", Some("class"), 10);
    assert!(hits.is_empty());
    let (total, hits) = find_symbol(&idx.read(), "format", None, 1);
    assert_eq!((total, hits.len()), (3, 1));
    let text = render_defs(
        "garuda index (1 of 1 files indexed)",
        "format",
        total,
        &hits,
    );
    assert!(
        text.starts_with("source: garuda index (1 of 1 files indexed)\n"),
        "{text}"
    );
    assert!(text.contains("[1 of 3 shown"), "{text}");
}

#[test]
fn find_references_by_name_and_by_line_grouped_by_file() {
    let idx = index_of(&fixtures().join("ts"));
    let st = idx.read();
    assert_eq!(
        name_at(&st, "src/greeter.ts", 11, None).as_deref(),
        Some("formatName")
    );
    assert_eq!(
        name_at(&st, "src/main.ts", 6, Some("formatName")).as_deref(),
        Some("formatName")
    );
    let (total, hits) = find_references(&st, "formatName", 50);
    assert_eq!(total, 3);
    let text = render_refs("s", "formatName", total, &hits);
    assert_eq!(
        text,
        "source: s\n3 references to formatName in 3 files\n\
         src/greeter.ts\n  7: return { text: formatName(name) };  (in greet)\n\
         src/main.ts\n  6: console.log(formatName(\" bob \"));  (in main)\n\
         src/view.tsx\n  3: export const Badge = (props: { name: string }) => <b>{formatName(props.name)}</b>;  (in Badge)\n"
    );
}

#[test]
fn the_map_ranks_the_most_used_first_within_its_budget_with_stable_bytes() {
    let idx = index_of(&fixtures().join("ts"));
    let map = repo_map(&idx.read(), "", 1000);
    assert_eq!(
        map,
        "src/greeter.ts:\n\
         \x20   1│ export interface Greeting {\n\
         \x20   5│ export class Greeter {  [1 use]\n\
         \x20   6│ greet(name: string): Greeting {  [1 use]\n\
         \x20  11│ export function formatName(name: string): string {  [2 uses]\n\
         src/main.ts:\n\
         \x20   3│ function main(): void {\n\
         src/view.tsx:\n\
         \x20   3│ export const Badge = (props: { name: string }) => <b>{formatName(props.name)}</b>;\n"
    );
    assert_eq!(
        map,
        repo_map(&index_of(&fixtures().join("ts")).read(), "", 1000)
    );
    // A small budget keeps the most-used definition and says what it left out.
    let small = repo_map(&idx.read(), "", 20);
    assert!(
        small.starts_with("src/greeter.ts:\n   11│ export function formatName"),
        "{small}"
    );
    assert!(small.contains("less-used definitions left out"), "{small}");
    assert!(small.len() <= 20 * 4 + 200, "{small}");
    // A folder: only its files.
    let js = index_of(&fixtures().join("python"));
    assert!(repo_map(&js.read(), "pkg", 1000).starts_with("pkg/models.py:"));
    assert_eq!(repo_map(&js.read(), "other", 1000), "");
}

#[test]
fn an_edit_is_reflected_after_the_file_alone_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.py"), "def first():\n    pass\n").unwrap();
    std::fs::write(dir.path().join("b.py"), "def other():\n    first()\n").unwrap();
    let idx = index_of(dir.path());
    assert_eq!(defs(&idx, "a.py"), ["function first 1-2"]);
    std::fs::write(dir.path().join("a.py"), "\ndef renamed():\n    pass\n").unwrap();
    std::fs::write(dir.path().join("c.py"), "def third():\n    renamed()\n").unwrap();
    idx.update(&["a.py".into(), "c.py".into()]);
    assert_eq!(defs(&idx, "a.py"), ["function renamed 2-3"]);
    assert_eq!(find_references(&idx.read(), "renamed", 10).0, 1);
    std::fs::remove_file(dir.path().join("b.py")).unwrap();
    idx.update(&["b.py".into()]);
    assert_eq!(find_references(&idx.read(), "first", 10).0, 0);
    assert_eq!(idx.read().files.len(), 2);
}

#[test]
fn links_out_of_the_root_ignored_huge_generated_and_binary_files_are_left_out() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.ts"), "function leaked() {}\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::os::unix::fs::symlink(outside.path().join("secret.ts"), root.join("link.ts")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("linkdir")).unwrap();
    std::fs::write(root.join(".gitignore"), "dist/\n").unwrap();
    std::fs::create_dir(root.join("dist")).unwrap();
    std::fs::write(root.join("dist/built.js"), "function built() {}\n").unwrap();
    // A huge file, and a generated one-line bundle under the size cap.
    let huge = "function f() {}\n".repeat(100_000);
    std::fs::write(root.join("huge.js"), huge).unwrap();
    let bundle = format!("function bundled(){{{}}}", "var a=1;".repeat(10_000));
    std::fs::write(root.join("bundle.js"), bundle).unwrap();
    std::fs::write(root.join("bin.js"), b"function x() {}\0\0").unwrap();
    std::fs::write(root.join("ok.ts"), "function fine() {}\n").unwrap();
    let idx = index_of(root);
    let st = idx.read();
    let files: Vec<&String> = st.files.keys().collect();
    assert_eq!(files, ["ok.ts"]);
    assert_eq!(st.skipped(), 3);
    assert!(st.progress().done);
    drop(st);
    // The watcher reporting a link's name changes nothing either.
    idx.update(&["link.ts".into(), "dist/built.js".into()]);
    assert_eq!(idx.read().files.len(), 1);
}

/// A FIFO named like source (a workspace can hold one) is never opened for reading: the
/// build does not wait on it, and the watcher reporting it changes nothing.
#[test]
fn a_fifo_named_like_source_neither_stalls_the_build_nor_is_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("pipe.ts"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    std::fs::write(root.join("ok.ts"), "function fine() {}\n").unwrap();
    let idx = index_of(root);
    let files: Vec<String> = idx.read().files.keys().cloned().collect();
    assert_eq!(files, ["ok.ts"]);
    idx.update(&["pipe.ts".into()]);
    assert_eq!(idx.read().files.len(), 1);
}

#[test]
fn the_caps_bound_files_and_symbols() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("f{i}.py")), "def a():\n    b()\n").unwrap();
    }
    let caps = IndexCaps {
        max_files: 3,
        max_symbols: 4,
        max_file_bytes: 1024,
    };
    let idx = CodeIndex::new(Arc::new(Root::open(dir.path()).unwrap()), caps);
    idx.build();
    let st = idx.read();
    assert_eq!(st.progress().total, 3);
    assert_eq!(st.files.len(), 2);
    assert_eq!(st.symbols(), 4);
    assert_eq!(index_source(&st), "garuda index (2 of 3 files indexed)");
}

#[test]
fn the_projects_own_source_is_indexed() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let idx = index_of(&src);
    let st = idx.read();
    assert!(st.progress().done);
    let (_, hits) = find_symbol(&st, "CodeIndex", Some("struct"), 5);
    assert_eq!(hits[0].path, "code/index.rs");
    assert_eq!(hits[0].signature.as_deref(), Some("pub struct CodeIndex {"));
    let (_, hits) = find_symbol(&st, "find_symbol", Some("function"), 5);
    assert_eq!(hits[0].path, "code/query.rs");
    let (total, refs) = find_references(&st, "repo_map", 50);
    assert!(
        total >= 1 && refs.iter().any(|r| r.path == "tools/builtin/repo_map.rs"),
        "{refs:?}"
    );
}

#[test]
fn before_the_build_ends_the_source_line_says_so_and_answers_cover_what_is_indexed() {
    let dir = fixtures().join("python");
    let idx = CodeIndex::new(Arc::new(Root::open(&dir).unwrap()), IndexCaps::default());
    assert_eq!(
        index_source(&idx.read()),
        "garuda index (0 of 0 files indexed; still building, answers cover the files indexed so far)"
    );
    // A file read before the build reaches it is answered from already.
    idx.update(&["pkg/models.py".into()]);
    let (_, hits) = find_symbol(&idx.read(), "check", None, 5);
    assert_eq!(hits[0].path, "pkg/models.py");
    idx.build();
    assert_eq!(
        index_source(&idx.read()),
        "garuda index (2 of 2 files indexed)"
    );
}
