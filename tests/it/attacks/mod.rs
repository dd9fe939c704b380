//! The attacks of the security issue, one test each, against the real binary: what a cloned
//! repository, a model under `full-auto` or a sandboxed command can try at the seams where
//! Garuda itself runs a program or opens a file because the workspace said so. Each test
//! failed on the main branch before its fix; docs/security.md names them claim by claim.

mod git;
mod names;
mod trust;
mod workspace_files;

/// Every test docs/security.md names as a claim's backing exists: a `fn` of that name in the
/// module path it gives (the Rust sources of the tree), so the threat model cannot cite a test
/// that was renamed or removed.
#[test]
fn the_threat_model_names_only_tests_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/security.md")).expect("docs/security.md");
    let mut sources = String::new();
    let mut stack = vec![root.join("crates"), root.join("tests/it"), root.join("src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                sources.push_str(&std::fs::read_to_string(&p).expect("read"));
            }
        }
    }
    let mut named = 0;
    for span in doc.split('`').skip(1).step_by(2) {
        // A test path: words joined by `::`, the last one the function.
        let parts: Vec<&str> = span.split("::").collect();
        let word =
            |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if parts.len() < 2 || !parts.iter().all(|w| word(w)) || span.contains("::*") {
            continue;
        }
        let Some(f) = parts.last() else { continue };
        // Type paths the doc names (`tools::EditRisk::Protected`) are not tests.
        if f.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
            continue;
        }
        named += 1;
        assert!(
            sources.contains(&format!("fn {f}(")),
            "docs/security.md names {span}, and no such test exists"
        );
    }
    assert!(
        named >= 20,
        "the threat model names its tests ({named} found)"
    );
}
