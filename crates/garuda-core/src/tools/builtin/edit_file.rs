//! `edit_file`: replaces exact text in a file the model has read.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::fsroot::Root;
use crate::message::ToolSpec;
use crate::tools::handler;
use crate::tools::util::{self, lenient_bool};
use crate::tools::vocab::{EditPreview, PlannedWrite, ToolContext, ToolOutput};
use crate::tools::write::{self, FileChange};

#[derive(Deserialize)]
pub(super) struct EditInput {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default, deserialize_with = "lenient_bool")]
    replace_all: bool,
}

/// `edit_file`.
pub(super) struct EditFile;

impl FileChange for EditFile {
    type Input = EditInput;
    fn name(&self) -> &str {
        "edit_file"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Edit", "MultiEdit"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "edit_file",
            "Replace exact text in a file. `old_string` must match the file exactly, including \
             whitespace and indentation (do not include the line-number prefix from read_file), \
             and must occur exactly once unless `replace_all` is true; add surrounding lines to \
             make it unique. The file must have been read with read_file in this session and \
             must not have changed on disk since.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit, relative to the workspace root."},
                    "old_string": {"type": "string", "description": "Exact text to replace."},
                    "new_string": {"type": "string", "description": "Replacement text; must differ from old_string."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence. Default false."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        )
    }
    fn describe(&self, input: &Value) -> String {
        handler::path_or_root(input)
    }
    fn preview(&self, input: &Value, root: &Root) -> Option<EditPreview> {
        let i: EditInput = serde_json::from_value(input.clone()).ok()?;
        if i.old_string.is_empty() {
            return None;
        }
        let rel = root.relative(Path::new(i.path.trim())).ok()?;
        let text = write::current_text(root, &rel)??;
        let at = text.find(i.old_string.as_str())?;
        let new_text = if i.replace_all {
            text.replace(&i.old_string, &i.new_string)
        } else {
            text.replacen(&i.old_string, &i.new_string, 1)
        };
        let line = text[..at].matches('\n').count() as u32 + 1;
        Some(EditPreview {
            rel_path: rel,
            old_text: Some(text),
            new_text,
            line,
        })
    }
    fn plan(&self, input: EditInput, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput> {
        let rel = util::resolve(ctx, &input.path)?;
        let shown = util::show(&rel);
        if input.old_string.is_empty() {
            return Err(ToolOutput::error(
                "old_string is empty; to create or replace a whole file use write_file",
            ));
        }
        if input.old_string == input.new_string {
            return Err(ToolOutput::error(
                "old_string and new_string are identical; nothing to change",
            ));
        }
        let stamp = write::check_fresh(ctx, &rel, &shown, "edit")?;
        let text = write::whole_text(ctx, &rel, &shown)?;
        let (mut old, mut new) = (input.old_string, input.new_string);
        let mut count = text.matches(old.as_str()).count();
        // A file with CRLF line ends still matches text the model wrote with LF.
        if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
            let crlf_old = old.replace('\n', "\r\n");
            let c = text.matches(crlf_old.as_str()).count();
            if c > 0 {
                old = crlf_old;
                new = new.replace("\r\n", "\n").replace('\n', "\r\n");
                count = c;
            }
        }
        if count == 0 {
            return Err(ToolOutput::error(format!(
                "old_string was not found in {shown}; it must match the file exactly, including \
                 whitespace and indentation (read the file again if unsure)"
            )));
        }
        if count > 1 && !input.replace_all {
            return Err(ToolOutput::error(format!(
                "old_string occurs {count} times in {shown}; add surrounding lines to make it unique, \
                 or set replace_all to true to replace every occurrence"
            )));
        }
        let new_text = if input.replace_all {
            text.replace(&old, &new)
        } else {
            text.replacen(&old, &new, 1)
        };
        // Where the first replacement landed, for a snippet the model can check.
        let at = text.find(old.as_str()).unwrap_or(0);
        let n = if input.replace_all { count } else { 1 };
        let s = if n == 1 { "" } else { "s" };
        let summary = format!(
            "edited {shown}: {n} replacement{s}\n{}",
            write::snippet(&new_text, at, &new)
        );
        Ok(PlannedWrite {
            rel_path: rel,
            old_text: Some(text),
            new_text,
            base: Some(stamp),
            summary,
        })
    }
}
