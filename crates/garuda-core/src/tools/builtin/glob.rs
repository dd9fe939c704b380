//! `glob`: the files whose path matches a glob pattern.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::fsroot::EntryKind;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util;
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput, Touch};
use crate::tools::walk::{compile_glob, list_walk};
use futures_util::future::BoxFuture;

use crate::message::ToolSpec;

#[derive(Deserialize)]
struct GlobInput {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: GlobInput = match util::parse("glob", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let matcher = match compile_glob(&input.pattern) {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(e),
    };
    let given = input.path.unwrap_or_default();
    let util::WalkStart {
        shown, base, kind, ..
    } = match util::walk_start(ctx, &given) {
        Ok(w) => w,
        Err(e) => return e,
    };
    if kind != EntryKind::Dir {
        return ToolOutput::error(format!("{shown} is not a folder"));
    }
    let matches = |entry: &ignore::DirEntry| {
        let file = entry.file_type().is_some_and(|t| t.is_file());
        let under = entry.path().strip_prefix(&base);
        (file && under.is_ok_and(|u| matcher.is_match(u))).then_some("")
    };
    list_walk(
        ctx,
        &base,
        None,
        matches,
        &format!("no files match {:?} in {shown}", input.pattern),
        "a narrower pattern or path",
    )
}

/// `glob`.
pub(super) struct Glob;

impl Tool for Glob {
    fn name(&self) -> &str {
        "glob"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Glob"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "glob",
            "Find files whose path matches a glob pattern, e.g. `**/*.rs` or `src/**/test_*.py`. \
             A pattern without `/` matches file names at any depth. `*` does not cross `/`; \
             `**` does. Results are sorted paths relative to the workspace root; .gitignore \
             is honoured.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, matched against paths relative to `path`."},
                    "path": {"type": "string", "description": "Folder to search in, relative to the workspace root. Default: the root."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Search
    }
    fn touch(&self) -> Option<Touch> {
        Some(Touch::Either("path"))
    }
    fn describe(&self, input: &Value) -> String {
        handler::with_path(
            handler::field(input, "pattern"),
            handler::field(input, "path"),
        )
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(handler::blocking("glob", input, ctx, run))
    }
}
