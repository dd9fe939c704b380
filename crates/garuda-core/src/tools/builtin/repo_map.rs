//! `repo_map`: an outline of the repository or a folder from the workspace's code index,
//! definitions ranked by how much the rest of the code uses them, cut to a token budget.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::symbols::{finish, with_index};
use crate::code::{CodeIndex, DEFAULT_BUDGET, index_source, repo_map};
use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util::{self, lenient_u64};
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput, Touch};

/// The tool's name.
pub(crate) const REPO_MAP: &str = "repo_map";

/// The largest budget a call may ask for, in tokens.
const MAX_BUDGET: u64 = 8192;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    budget: Option<u64>,
}

/// `repo_map` over a workspace's index.
pub(crate) struct RepoMap(pub(crate) Arc<CodeIndex>);

impl Tool for RepoMap {
    fn name(&self) -> &str {
        REPO_MAP
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            REPO_MAP,
            "An outline of the repository, or of one folder: files and the first line of their \
             definitions, the most-used definitions first, cut to a token budget. Use it to \
             find your way in unfamiliar code before reading files.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A folder relative to the workspace root. Default: the whole repository."},
                    "budget": {"type": "integer", "minimum": 128, "maximum": MAX_BUDGET, "description": "The most tokens of outline. Default: 2048."}
                },
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Search
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::RepoMap)
    }
    fn touch(&self) -> Option<Touch> {
        Some(Touch::Folder("path"))
    }
    fn describe(&self, input: &Value) -> String {
        match handler::field(input, "path") {
            "" => ".".to_string(),
            p => p.to_string(),
        }
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match util::parse(REPO_MAP, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let prefix = match input
                .path
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
            {
                None => String::new(),
                Some(p) => match util::resolve(ctx, p) {
                    Ok(rel) => util::show(&rel),
                    Err(e) => return e,
                },
            };
            let budget = input
                .budget
                .unwrap_or(DEFAULT_BUDGET as u64)
                .clamp(128, MAX_BUDGET) as usize;
            let text = with_index(&self.0, move |st| {
                let map = repo_map(st, &prefix, budget);
                let body = if map.is_empty() {
                    format!(
                        "no definitions indexed under {}\n",
                        if prefix.is_empty() { "." } else { &prefix }
                    )
                } else {
                    map
                };
                format!("source: {}\n{body}", index_source(st))
            })
            .await;
            match text {
                Some(t) => finish(t, ctx),
                None => ToolOutput::error("repo_map failed internally"),
            }
        })
    }
}
