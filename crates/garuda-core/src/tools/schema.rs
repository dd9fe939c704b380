//! The JSON schemas and descriptions the model sees. Written by hand so their bytes stay
//! stable across builds (they sit in the cached prompt prefix).

use serde_json::{Value, json};

use crate::message::ToolSpec;

fn spec(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema,
    }
}

/// The built-in tools' specs, in a fixed order.
pub fn builtin_specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "read_file",
            "Read a text file in the workspace. Output is line-numbered like `cat -n` \
             (number, tab, line). Reads up to 2000 lines from `offset` (1-based, default 1); \
             a note at the end says how to read further. Binary files are refused. You must \
             read a file in this session before editing or overwriting it. Paths are relative \
             to the workspace root (absolute paths inside it work too).",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read, 1-based. Default 1."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to return. Default and maximum 2000."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        spec(
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
        ),
        spec(
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
        ),
        spec(
            "grep",
            "Search file contents with a regular expression (Rust regex syntax, like ripgrep). \
             Output lines are `path:line:text`; context lines are `path-line-text`. Honours \
             .gitignore and skips binary files. Use `glob` to restrict which files are searched.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to search for."},
                    "path": {"type": "string", "description": "File or folder to search, relative to the workspace root. Default: the root."},
                    "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs` or `src/**/*.ts`."},
                    "ignore_case": {"type": "boolean", "description": "Match case-insensitively. Default false."},
                    "context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Lines of context before and after each match. Default 0."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        spec(
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
        ),
        spec(
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
        ),
        spec(
            "bash",
            "Run a shell command with `bash -c` in the workspace root. Stdin is empty; stdout \
             and stderr are captured together and long output keeps only its beginning and end. \
             The command is killed after `timeout_ms` (default 120000, maximum 600000), and \
             processes it leaves in the background are stopped when it ends. Output ends with \
             the exit code. Use read_file, grep, glob and list_files rather than cat, grep or \
             find.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line to run."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds. Default 120000."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
        spec(
            "remember",
            "Save one durable fact about this project (a convention, a command, a preference the \
             user stated) to the workspace memory file `.garuda/memory.md`, which is shown to \
             you in later sessions. One short sentence; no secrets.",
            json!({
                "type": "object",
                "properties": {
                    "fact": {"type": "string", "description": "The fact, one sentence."}
                },
                "required": ["fact"],
                "additionalProperties": false
            }),
        ),
        spec(
            "todo_write",
            "Replace the session's task list (shown to the user). Use it for work with several \
             steps: list the steps, mark one `in_progress` before starting it and `completed` as \
             soon as it is done. At most one item may be `in_progress`. Send the whole list \
             each time.",
            json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "description": "The complete task list, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "description": "What to do."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
        ),
    ]
}
