//! `remember`: appends one fact to the workspace memory file.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util;
use crate::tools::vocab::{MEMORY_FILE, ToolClass, ToolContext, ToolMeta, ToolOutput};
use futures_util::future::BoxFuture;

/// Longest fact accepted, in characters.
const MAX_FACT_CHARS: usize = 1000;

#[derive(Deserialize)]
struct Input {
    fact: String,
}

fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: Input = match util::parse("remember", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    // One fact, one list line: inner line breaks would break the list.
    let fact = input.fact.split_whitespace().collect::<Vec<_>>().join(" ");
    let fact = fact.trim_start_matches(['-', '*', ' ']).trim();
    if fact.is_empty() {
        return ToolOutput::error("remember needs a non-empty fact");
    }
    if fact.chars().count() > MAX_FACT_CHARS {
        return ToolOutput::error(format!(
            "the fact is longer than {MAX_FACT_CHARS} characters; state it more briefly"
        ));
    }
    let rel = Path::new(MEMORY_FILE);
    // Start on a fresh line when the file does not end with one.
    let lead = match ctx.root.read_bytes(rel, 16 * 1024 * 1024) {
        Ok((bytes, _)) if !bytes.is_empty() && !bytes.ends_with(b"\n") => "\n",
        _ => "",
    };
    if let Err(e) = ctx.root.append(rel, format!("{lead}- {fact}\n").as_bytes()) {
        return util::fs_error(MEMORY_FILE, e);
    }
    // The model's own append does not make its earlier read of the file stale.
    let mut tracker = ctx.tracker();
    if tracker.stamp(rel).is_some()
        && let Ok(s) = ctx.root.stamp(rel)
    {
        tracker.record(rel, s);
    }
    let meta = ToolMeta {
        path: Some(MEMORY_FILE.to_string()),
        wrote: true,
        ..ToolMeta::default()
    };
    ToolOutput::ok(format!("remembered in {MEMORY_FILE}: {fact}")).with_meta(meta)
}

/// `remember`.
pub(super) struct Remember;

impl Tool for Remember {
    fn name(&self) -> &str {
        "remember"
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
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
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Memory
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "fact").to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(handler::blocking("remember", input, ctx, run))
    }
}
