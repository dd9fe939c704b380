//! `grep`: regex search over an ignore-aware walk with the ripgrep crates, `path:line:text`.

use std::path::PathBuf;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::fsroot::EntryKind;
use crate::message::ToolSpec;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util::{self, lenient_bool, lenient_u64};
use crate::tools::vocab::{ToolClass, ToolContext, ToolMeta, ToolOutput, Touch};
use crate::tools::walk::{cancelled, compile_glob, files_under};
use futures_util::future::BoxFuture;

/// Most bytes of one file searched; the rest of a larger file is not searched.
const FILE_CAP: u64 = 8 * 1024 * 1024;
/// Longest line shown in full.
const MAX_LINE_CHARS: usize = 400;
/// Most context lines around a match.
const MAX_CONTEXT: u64 = 10;

#[derive(Deserialize)]
struct Input {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default, deserialize_with = "lenient_bool")]
    ignore_case: bool,
    #[serde(default, deserialize_with = "lenient_u64")]
    context: Option<u64>,
}

/// Collects output lines for one file and counts matches.
struct Collect<'a> {
    shown: &'a str,
    lines: &'a mut Vec<String>,
    matches: &'a mut usize,
    cap: usize,
}

impl Collect<'_> {
    fn push(&mut self, sep: char, line_no: Option<u64>, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = util::cut_chars(text, MAX_LINE_CHARS);
        let n = line_no.unwrap_or(0);
        self.lines
            .push(format!("{}{sep}{n}{sep}{text}", self.shown));
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let first = m.line_number();
        for (i, line) in m.lines().enumerate() {
            self.push(':', first.map(|n| n + i as u64), line);
            *self.matches += 1;
        }
        Ok(*self.matches < self.cap)
    }

    fn context(&mut self, _s: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        self.push('-', c.line_number(), c.bytes());
        Ok(true)
    }

    fn context_break(&mut self, _s: &Searcher) -> Result<bool, Self::Error> {
        self.lines.push("--".to_string());
        Ok(true)
    }
}

fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: Input = match util::parse("grep", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    if input.pattern.is_empty() {
        return ToolOutput::error("grep needs a non-empty pattern");
    }
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(input.ignore_case)
        .build(&input.pattern)
    {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(format!("invalid regex {:?}: {e}", input.pattern)),
    };
    let filter = match input
        .glob
        .as_deref()
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        Some(g) => match compile_glob(g) {
            Ok(m) => Some(m),
            Err(e) => return ToolOutput::error(e),
        },
        None => None,
    };
    let given = input.path.unwrap_or_default();
    let util::WalkStart {
        rel,
        shown,
        base,
        kind,
    } = match util::walk_start(ctx, &given) {
        Ok(w) => w,
        Err(e) => return e,
    };
    let files: Vec<PathBuf> = match kind {
        EntryKind::Dir => files_under(ctx, &base)
            .into_iter()
            .filter(|f| {
                filter.as_ref().is_none_or(|g| {
                    let abs = ctx.root.path().join(f);
                    abs.strip_prefix(&base).is_ok_and(|u| g.is_match(u))
                })
            })
            .collect(),
        EntryKind::File => vec![rel.clone()],
        EntryKind::Other => {
            return ToolOutput::error(format!("{shown} is neither a file nor a folder"));
        }
    };
    let context = input.context.unwrap_or(0).min(MAX_CONTEXT) as usize;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let cap = ctx.limits.max_results.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut matches = 0usize;
    let mut files_with = 0usize;
    let mut capped = false;
    for f in &files {
        if ctx.cancel.is_cancelled() {
            return cancelled();
        }
        let Ok((bytes, _total)) = ctx.root.read_bytes(f, FILE_CAP) else {
            continue;
        };
        let before = matches;
        let fshown = util::show(f);
        let mark = lines.len();
        let sink = Collect {
            shown: &fshown,
            lines: &mut lines,
            matches: &mut matches,
            cap,
        };
        if searcher.search_slice(&matcher, &bytes, sink).is_err() {
            continue;
        }
        if matches > before {
            files_with += 1;
            if context > 0 && mark > 0 {
                lines.insert(mark, "--".to_string());
            }
        }
        if matches >= cap {
            // The sink stopped at the cap; more matches may follow.
            capped = true;
            break;
        }
    }
    if matches == 0 {
        return ToolOutput::ok(format!("no matches for {:?} in {shown}", input.pattern));
    }
    let body = lines.join("\n");
    let (mut body, cut) = util::cap_middle(&body, ctx.limits.output_max_chars);
    let mut meta = ToolMeta::default();
    if capped || cut {
        meta.truncated = true;
    }
    body.push('\n');
    if capped {
        body.push_str(&format!(
            "[stopped after {matches} matching lines; narrow the pattern, path or glob to see the rest]"
        ));
    } else {
        body.push_str(&format!("[{matches} matching lines in {files_with} files]"));
    }
    ToolOutput::ok(body).with_meta(meta)
}

/// `grep`.
pub(super) struct Grep;

impl Tool for Grep {
    fn name(&self) -> &str {
        "grep"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Grep"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
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
        Box::pin(handler::blocking("grep", input, ctx, run))
    }
}
