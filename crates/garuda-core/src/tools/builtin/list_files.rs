//! `list_files`: the files and folders beneath a folder, sorted.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::fsroot::EntryKind;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util::{self, lenient_u64};
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput, Touch};
use crate::tools::walk::list_walk;
use futures_util::future::BoxFuture;

use crate::message::ToolSpec;

/// Deepest `list_files` walk the model may ask for.
const MAX_DEPTH: u64 = 20;

#[derive(Deserialize)]
struct ListInput {
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    depth: Option<u64>,
}

fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: ListInput = match util::parse("list_files", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let given = input.path.unwrap_or_default();
    let util::WalkStart {
        shown, base, kind, ..
    } = match util::walk_start(ctx, &given) {
        Ok(w) => w,
        Err(e) => return e,
    };
    if kind != EntryKind::Dir {
        return ToolOutput::error(format!(
            "{shown} is not a folder; use read_file to read a file"
        ));
    }
    let depth = input.depth.unwrap_or(2).clamp(1, MAX_DEPTH) as usize;
    // The folder itself is not one of its entries.
    let marks = |entry: &ignore::DirEntry| match entry.file_type() {
        _ if entry.depth() == 0 => None,
        Some(t) if t.is_dir() => Some("/"),
        Some(t) if t.is_symlink() => Some("@"),
        _ => Some(""),
    };
    list_walk(
        ctx,
        &base,
        Some(depth),
        marks,
        &format!("{shown} is empty (or every entry in it is ignored)"),
        "list_files with a deeper path or smaller depth",
    )
}

/// `list_files`.
pub(super) struct ListFiles;

impl Tool for ListFiles {
    fn name(&self) -> &str {
        "list_files"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["LS"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "list_files",
            "List files and folders beneath a folder of the workspace, sorted, as paths \
             relative to the root. Folders end with `/`, links with `@` (links are not \
             followed). Honours .gitignore; `.git` is skipped.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Folder to list, relative to the workspace root. Default: the root."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 20, "description": "How many levels deep to list. Default 2."}
                },
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    fn touch(&self) -> Option<Touch> {
        Some(Touch::Folder("path"))
    }
    fn describe(&self, input: &Value) -> String {
        handler::path_or_root(input)
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(handler::blocking("list_files", input, ctx, run))
    }
}
