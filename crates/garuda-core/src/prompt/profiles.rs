//! Part 3: build and test notes of the language profiles detected in the root.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fsroot::{EntryKind, Root};

/// The root files whose presence selects a profile.
pub(crate) const MARKERS: &[&str] = &[
    "Cargo.toml",
    "package.json",
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lock",
    "bun.lockb",
    "pyproject.toml",
    "uv.lock",
    "poetry.lock",
    "pytest.ini",
    "conftest.py",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "tox.ini",
    "pom.xml",
    "mvnw",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "gradlew",
    "go.mod",
    "Makefile",
    "makefile",
    "GNUmakefile",
];

/// How much of a manifest is read to look for hints (test script, pytest, make target).
const HINT_CHARS: usize = 64_000;

/// What detection looks at: which marker files exist, and the manifests it peeks into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// Marker files present in the root as regular files.
    pub files: BTreeSet<String>,
    /// The start of pyproject.toml.
    pub pyproject: Option<String>,
    /// The start of package.json.
    pub package_json: Option<String>,
    /// The start of the Makefile.
    pub makefile: Option<String>,
}

impl Probe {
    /// Looks at the root through fsroot: existence checks and a few bounded reads.
    pub fn read(root: &Root) -> Probe {
        let mut probe = Probe::default();
        for name in MARKERS {
            if let Ok(Some(EntryKind::File)) = root.kind(Path::new(name)) {
                probe.files.insert((*name).to_string());
            }
        }
        let text = |name: &str| {
            root.read_text(Path::new(name), HINT_CHARS)
                .ok()
                .map(|r| r.text)
        };
        if probe.has("pyproject.toml") {
            probe.pyproject = text("pyproject.toml");
        }
        if probe.has("package.json") {
            probe.package_json = text("package.json");
        }
        if let Some(mk) = ["GNUmakefile", "makefile", "Makefile"]
            .into_iter()
            .find(|m| probe.has(m))
        {
            probe.makefile = text(mk);
        }
        probe
    }

    fn has(&self, name: &str) -> bool {
        self.files.contains(name)
    }
}

/// One detected toolchain and how to test with it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// Short name, e.g. "Cargo".
    pub name: String,
    /// The root file it was detected from.
    pub marker: String,
    /// The command that runs the tests.
    pub test: String,
    /// How to run one test.
    pub one_test: String,
    /// What to do when a dependency is missing.
    pub missing_dependency: String,
}

fn profile(name: &str, marker: &str, test: &str, one: &str, missing: &str) -> Profile {
    Profile {
        name: name.to_string(),
        marker: marker.to_string(),
        test: test.to_string(),
        one_test: one.to_string(),
        missing_dependency: missing.to_string(),
    }
}

/// The profiles that match, in a fixed order (Cargo, JS, Python, Maven, Gradle, Go, Make).
pub fn detect(p: &Probe) -> Vec<Profile> {
    let mut out = Vec::new();
    if p.has("Cargo.toml") {
        out.push(profile(
            "Cargo",
            "Cargo.toml",
            "`cargo test`",
            "`cargo test NAME` runs the tests whose path contains NAME; add `--test FILE` for \
             an integration test in tests/FILE.rs, `-p CRATE` in a workspace.",
            "add it with `cargo add CRATE` (only when the task needs a new crate); when crates \
             cannot be downloaded, say so instead of vendoring code.",
        ));
    }
    if let Some(js) = detect_js(p) {
        out.push(js);
    }
    if let Some(py) = detect_python(p) {
        out.push(py);
    }
    if p.has("pom.xml") {
        let mvn = if p.has("mvnw") { "./mvnw" } else { "mvn" };
        out.push(profile(
            "Maven",
            "pom.xml",
            &format!("`{mvn} -q test`"),
            &format!(
                "`{mvn} -q test -Dtest=ClassName#method` (add `-pl MODULE -am` in a \
                 multi-module build)."
            ),
            &format!(
                "add a <dependency> to pom.xml and run `{mvn} -q dependency:resolve`; when the \
                 repository cannot be reached, say so."
            ),
        ));
    }
    let gradle = [
        "build.gradle.kts",
        "build.gradle",
        "settings.gradle.kts",
        "settings.gradle",
    ]
    .into_iter()
    .find(|m| p.has(m));
    if let Some(marker) = gradle {
        let g = if p.has("gradlew") {
            "./gradlew"
        } else {
            "gradle"
        };
        out.push(profile(
            "Gradle",
            marker,
            &format!("`{g} test`"),
            &format!("`{g} test --tests 'package.ClassName.method'` (`:module:test` in a multi-project build)."),
            &format!(
                "add it to the dependencies block of {marker} and run `{g} test` again (Gradle \
                 downloads it); when the repository cannot be reached, say so."
            ),
        ));
    }
    if p.has("go.mod") {
        out.push(profile(
            "Go",
            "go.mod",
            "`go test ./...`",
            "`go test ./path/to/pkg -run '^TestName$'`",
            "`go get module@version`, then `go mod tidy`.",
        ));
    }
    if let Some(mk) = ["GNUmakefile", "makefile", "Makefile"]
        .into_iter()
        .find(|m| p.has(m))
    {
        let targets = make_targets(p.makefile.as_deref().unwrap_or(""));
        let test = match targets.iter().find(|t| *t == "test" || *t == "check") {
            Some(t) => format!("`make {t}`"),
            None => format!("no test target in {mk}; read it for the targets it has"),
        };
        out.push(profile(
            "Make",
            mk,
            &test,
            "use the language's own test runner for one test; `make -n TARGET` shows what a \
             target runs.",
            &format!(
                "look in {mk} for a setup or install target (e.g. `make deps`) before \
                 installing by hand."
            ),
        ));
    }
    out
}

fn detect_js(p: &Probe) -> Option<Profile> {
    if !p.has("package.json") {
        return None;
    }
    let has_test_script = p
        .package_json
        .as_deref()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        .is_some_and(|v| v.get("scripts").and_then(|s| s.get("test")).is_some());
    let (name, marker, run, one, add, install) = if p.has("pnpm-lock.yaml") {
        (
            "pnpm",
            "pnpm-lock.yaml",
            "pnpm test",
            "pnpm test -- FILE_OR_PATTERN",
            "pnpm add NAME",
            "pnpm install",
        )
    } else if p.has("yarn.lock") {
        (
            "yarn",
            "yarn.lock",
            "yarn test",
            "yarn test FILE_OR_PATTERN",
            "yarn add NAME",
            "yarn install",
        )
    } else if p.has("bun.lock") || p.has("bun.lockb") {
        let marker = if p.has("bun.lock") {
            "bun.lock"
        } else {
            "bun.lockb"
        };
        (
            "bun",
            marker,
            "bun run test",
            "bun run test FILE_OR_PATTERN",
            "bun add NAME",
            "bun install",
        )
    } else {
        let marker = if p.has("package-lock.json") {
            "package-lock.json"
        } else {
            "package.json"
        };
        (
            "npm",
            marker,
            "npm test",
            "npm test -- FILE_OR_PATTERN",
            "npm install NAME",
            "npm install",
        )
    };
    let test = if has_test_script || p.package_json.is_none() {
        format!("`{run}`")
    } else {
        format!("package.json has no test script; read its scripts before running `{run}`")
    };
    Some(profile(
        name,
        marker,
        &test,
        &format!("`{one}` (the arguments go to the test runner the script calls)."),
        &format!(
            "run `{install}` when node_modules is missing or stale; `{add}` for a new \
             dependency (only when the task needs one)."
        ),
    ))
}

fn detect_python(p: &Probe) -> Option<Profile> {
    let markers = [
        "pyproject.toml",
        "uv.lock",
        "poetry.lock",
        "pytest.ini",
        "conftest.py",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
        "tox.ini",
    ];
    let first = markers.into_iter().find(|m| p.has(m))?;
    let pyproject = p.pyproject.as_deref().unwrap_or("");
    let pytest = p.has("pytest.ini")
        || p.has("conftest.py")
        || pyproject.contains("pytest")
        || p.has("tox.ini");
    let (name, marker, runner, missing) = if p.has("uv.lock") || pyproject.contains("[tool.uv") {
        let marker = if p.has("uv.lock") {
            "uv.lock"
        } else {
            "pyproject.toml"
        };
        (
            "Python (uv)",
            marker,
            "uv run ",
            "`uv sync` installs what the lock file lists; `uv add NAME` adds a new dependency.",
        )
    } else if p.has("poetry.lock") || pyproject.contains("[tool.poetry") {
        let marker = if p.has("poetry.lock") {
            "poetry.lock"
        } else {
            "pyproject.toml"
        };
        (
            "Python (poetry)",
            marker,
            "poetry run ",
            "`poetry install` installs what the lock file lists; `poetry add NAME` adds a new \
             dependency.",
        )
    } else {
        (
            "Python",
            first,
            "python -m ",
            "install it into the project's virtual environment (.venv: `python -m pip install \
             NAME`), never system-wide; add it to the project's dependency list when the code \
             needs it.",
        )
    };
    let (test, one) = if pytest {
        (
            format!("`{runner}pytest`"),
            format!(
                "`{runner}pytest path/to/test_file.py::test_name` (`-k PATTERN` to select by name)."
            ),
        )
    } else {
        (
            format!("`{runner}pytest` when the project uses pytest, else `{runner}unittest`"),
            format!(
                "`{runner}pytest path/to/test_file.py::test_name`, or `{runner}unittest package.module.TestCase.test_name`."
            ),
        )
    };
    Some(profile(name, marker, &test, &one, missing))
}

/// Targets defined in a Makefile (lines `name:` at the start, not variable assignments).
fn make_targets(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(['\t', ' ', '#', '.']))
        .filter_map(|l| {
            let (names, rest) = l.split_once(':')?;
            if rest.starts_with('=') {
                return None;
            }
            Some(
                names
                    .split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect()
}

/// The section text, or `None` when nothing matched.
pub(crate) fn build_section(profiles: &[Profile]) -> Option<String> {
    if profiles.is_empty() {
        return None;
    }
    let mut out = String::from(
        "# Build and test (detected by Garuda)\n\nGaruda found these from files in the root; \
         the project instructions below take precedence.",
    );
    for p in profiles {
        out.push_str(&format!(
            "\n\n## {} ({})\n- Run the tests: {}\n- Run one test: {}\n- Missing dependency: {}",
            p.name, p.marker, p.test, p.one_test, p.missing_dependency
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(files: &[&str]) -> Probe {
        Probe {
            files: files.iter().map(|s| s.to_string()).collect(),
            ..Probe::default()
        }
    }

    fn names(p: &Probe) -> Vec<(String, String)> {
        detect(p).into_iter().map(|p| (p.name, p.marker)).collect()
    }

    #[test]
    fn nothing_detected_means_no_section() {
        assert!(detect(&probe(&["README.md"])).is_empty());
        assert_eq!(build_section(&[]), None);
    }

    #[test]
    fn each_language() {
        let cases: &[(&[&str], &str, &str, &str)] = &[
            (&["Cargo.toml"], "Cargo", "Cargo.toml", "`cargo test`"),
            (&["package.json"], "npm", "package.json", "`npm test`"),
            (
                &["package.json", "package-lock.json"],
                "npm",
                "package-lock.json",
                "`npm test`",
            ),
            (
                &["package.json", "pnpm-lock.yaml"],
                "pnpm",
                "pnpm-lock.yaml",
                "`pnpm test`",
            ),
            (
                &["package.json", "yarn.lock"],
                "yarn",
                "yarn.lock",
                "`yarn test`",
            ),
            (
                &["package.json", "bun.lock"],
                "bun",
                "bun.lock",
                "`bun run test`",
            ),
            (
                &["pyproject.toml", "uv.lock", "pytest.ini"],
                "Python (uv)",
                "uv.lock",
                "`uv run pytest`",
            ),
            (
                &["pyproject.toml", "poetry.lock", "conftest.py"],
                "Python (poetry)",
                "poetry.lock",
                "`poetry run pytest`",
            ),
            (
                &["pytest.ini"],
                "Python",
                "pytest.ini",
                "`python -m pytest`",
            ),
            (&["pom.xml"], "Maven", "pom.xml", "`mvn -q test`"),
            (&["pom.xml", "mvnw"], "Maven", "pom.xml", "`./mvnw -q test`"),
            (
                &["build.gradle.kts", "gradlew"],
                "Gradle",
                "build.gradle.kts",
                "`./gradlew test`",
            ),
            (&["build.gradle"], "Gradle", "build.gradle", "`gradle test`"),
            (&["go.mod"], "Go", "go.mod", "`go test ./...`"),
        ];
        for (files, name, marker, test) in cases {
            let found = detect(&probe(files));
            assert_eq!(found.len(), 1, "{files:?}");
            assert_eq!(found[0].name, *name, "{files:?}");
            assert_eq!(found[0].marker, *marker, "{files:?}");
            assert_eq!(found[0].test, *test, "{files:?}");
            assert!(!found[0].one_test.is_empty() && !found[0].missing_dependency.is_empty());
        }
    }

    #[test]
    fn python_hints_from_pyproject() {
        let mut p = probe(&["pyproject.toml"]);
        p.pyproject = Some("[tool.poetry]\nname='x'\n[tool.pytest.ini_options]\n".into());
        let found = detect(&p);
        assert_eq!(found[0].name, "Python (poetry)");
        assert_eq!(found[0].test, "`poetry run pytest`");
        p.pyproject = Some("[project]\nname='x'\n".into());
        let found = detect(&p);
        assert_eq!(found[0].name, "Python");
        assert!(found[0].test.contains("unittest"));
    }

    #[test]
    fn npm_without_test_script_says_so() {
        let mut p = probe(&["package.json"]);
        p.package_json = Some(r#"{"scripts":{"build":"tsc"}}"#.into());
        assert!(detect(&p)[0].test.contains("no test script"));
        p.package_json = Some(r#"{"scripts":{"test":"vitest"}}"#.into());
        assert_eq!(detect(&p)[0].test, "`npm test`");
    }

    #[test]
    fn make_targets_and_order() {
        let mut p = probe(&["Makefile", "go.mod", "Cargo.toml"]);
        p.makefile = Some("CC := gcc\nall: build\nbuild test: x\n\tcargo test\n".into());
        assert_eq!(
            names(&p),
            vec![
                ("Cargo".into(), "Cargo.toml".into()),
                ("Go".into(), "go.mod".into()),
                ("Make".into(), "Makefile".into())
            ]
        );
        assert_eq!(detect(&p)[2].test, "`make test`");
        p.makefile = Some("all:\n\tcc x.c\n".into());
        assert!(detect(&p)[2].test.contains("no test target"));
    }

    #[test]
    fn section_lists_each_profile() {
        let s = build_section(&detect(&probe(&["Cargo.toml", "go.mod"]))).unwrap();
        assert!(s.starts_with("# Build and test (detected by Garuda)\n"));
        assert!(s.contains("## Cargo (Cargo.toml)\n- Run the tests: `cargo test`"));
        assert!(s.contains("## Go (go.mod)"));
    }
}
