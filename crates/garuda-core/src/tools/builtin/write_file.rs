//! `write_file`: creates a file or replaces its whole text.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::fsroot::EntryKind;
use crate::fsroot::Root;
use crate::message::ToolSpec;
use crate::tools::handler;
use crate::tools::util;
use crate::tools::vocab::{EditPreview, PlannedWrite, ToolContext, ToolOutput};
use crate::tools::write::{self, FileChange};

#[derive(Deserialize)]
pub(super) struct WriteInput {
    path: String,
    content: String,
}

/// `write_file`.
pub(super) struct WriteFile;

impl FileChange for WriteFile {
    type Input = WriteInput;
    fn name(&self) -> &str {
        "write_file"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Write"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "write_file",
            "Create a file, or replace a file's whole content. Parent folders are created. \
             Replacing an existing file requires having read it in this session; prefer \
             edit_file for changes to existing files.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write, relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        )
    }
    fn describe(&self, input: &Value) -> String {
        format!(
            "{} ({} bytes)",
            handler::field(input, "path"),
            handler::field(input, "content").len()
        )
    }
    fn preview(&self, input: &Value, root: &Root) -> Option<EditPreview> {
        let i: WriteInput = serde_json::from_value(input.clone()).ok()?;
        let rel = root.relative(Path::new(i.path.trim())).ok()?;
        let old_text = write::current_text(root, &rel)?;
        Some(EditPreview {
            rel_path: rel,
            old_text,
            new_text: i.content,
            line: 1,
        })
    }
    fn plan(&self, input: WriteInput, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput> {
        let rel = util::resolve(ctx, &input.path)?;
        let shown = util::show(&rel);
        if rel == Path::new(".") {
            return Err(ToolOutput::error(
                "write_file needs a file path, not the workspace root",
            ));
        }
        match ctx.root.kind(&rel).map_err(|e| util::fs_error(&shown, e))? {
            None => Ok(PlannedWrite {
                rel_path: rel,
                old_text: None,
                summary: format!("created {shown} ({} bytes)", input.content.len()),
                new_text: input.content,
                base: None,
            }),
            Some(EntryKind::File) => {
                let stamp = write::check_fresh(ctx, &rel, &shown, "overwrite")?;
                let old = ctx
                    .root
                    .read_text(&rel, write::EDIT_MAX_CHARS)
                    .map(|r| r.text)
                    .map_err(|e| util::fs_error(&shown, e))?;
                Ok(PlannedWrite {
                    rel_path: rel,
                    old_text: Some(old),
                    summary: format!("wrote {shown} ({} bytes)", input.content.len()),
                    new_text: input.content,
                    base: Some(stamp),
                })
            }
            Some(EntryKind::Dir) => Err(ToolOutput::error(format!("{shown} is a folder"))),
            Some(EntryKind::Other) => {
                Err(ToolOutput::error(format!("{shown} is not a regular file")))
            }
        }
    }
}
