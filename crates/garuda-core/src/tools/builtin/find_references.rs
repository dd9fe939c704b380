//! `find_references`: the uses of a symbol, by name or by the place it is defined or used,
//! grouped by file, from the client's language servers when it has them, else from the
//! workspace's code index.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::symbols::{MAX_ITEMS, ask_client, finish, with_index};
use crate::code::{CodeIndex, RefHit, find_references, index_source, name_at, render_refs};
use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util::{self, lenient_u64};
use crate::tools::vocab::{SymbolQuery, ToolClass, ToolContext, ToolOutput, Touch};

/// The tool's name.
pub(crate) const FIND_REFERENCES: &str = "find_references";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    line: Option<u64>,
}

/// `find_references` over a workspace's index.
pub(crate) struct FindReferences(pub(crate) Arc<CodeIndex>);

impl Tool for FindReferences {
    fn name(&self) -> &str {
        FIND_REFERENCES
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            FIND_REFERENCES,
            "Find where a symbol is used (calls, constructions, type uses), grouped by file, each \
             with its line and the definition it sits in. Give `name`, or `path` and `line` of \
             its definition or of a use (with `name` too when the line holds several).",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The symbol's exact name."},
                    "path": {"type": "string", "description": "A file holding the symbol, relative to the workspace root."},
                    "line": {"type": "integer", "minimum": 1, "description": "The 1-based line in `path` where it is defined or used."}
                },
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Search
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::FindReferences)
    }
    fn touch(&self) -> Option<Touch> {
        Some(Touch::File("path"))
    }
    fn describe(&self, input: &Value) -> String {
        let name = handler::field(input, "name");
        match (handler::field(input, "path"), input.get("line")) {
            ("", _) => name.to_string(),
            (p, Some(l)) => format!("{name} {p}:{l}").trim().to_string(),
            (p, None) => handler::with_path(name, p),
        }
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match util::parse(FIND_REFERENCES, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let name = input
                .name
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty());
            let line = match input.line.map(u32::try_from) {
                None => None,
                Some(Ok(l)) if l >= 1 => Some(l),
                Some(_) => return ToolOutput::error("`line` is 1-based"),
            };
            let path = match input
                .path
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
            {
                None => None,
                Some(p) => match util::resolve(ctx, p) {
                    Ok(rel) => Some(util::show(&rel)),
                    Err(e) => return e,
                },
            };
            let at = match (path, line) {
                (Some(p), Some(l)) => Some((p, l)),
                (None, None) => None,
                _ => return ToolOutput::error("give `path` and `line` together"),
            };
            if name.is_none() && at.is_none() {
                return ToolOutput::error("find_references needs `name`, or `path` and `line`");
            }
            let limit = MAX_ITEMS.min(ctx.limits.max_results);
            let query = SymbolQuery::References {
                name: name.clone(),
                path: at.as_ref().map(|(p, _)| p.clone()),
                line: at.as_ref().map(|(_, l)| *l),
                limit,
            };
            let shown = name.clone().unwrap_or_else(|| {
                at.as_ref()
                    .map(|(p, l)| format!("the symbol at {p}:{l}"))
                    .unwrap_or_default()
            });
            if let Some((source, items)) = ask_client(bench, ctx, query).await {
                let hits: Vec<RefHit> = items
                    .into_iter()
                    .map(|s| RefHit {
                        path: s.path,
                        line: s.line,
                        text: s.text,
                        enclosing: None,
                    })
                    .collect();
                let text = render_refs(
                    &format!("language server {source}"),
                    &shown,
                    hits.len(),
                    &hits,
                );
                return finish(text, ctx);
            }
            let answer = with_index(&self.0, move |st| {
                let source = index_source(st);
                let name = match (&at, name) {
                    (Some((p, l)), n) => match name_at(st, p, *l, n.as_deref()) {
                        Some(n) => n,
                        None => {
                            return Err(format!(
                                "source: {source}\nno symbol {}at {p}:{l} in the index; give `name`",
                                n.map(|n| format!("{n:?} ")).unwrap_or_default()
                            ));
                        }
                    },
                    (None, Some(n)) => n,
                    (None, None) => return Err(String::new()),
                };
                let (total, hits) = find_references(st, &name, limit);
                Ok(render_refs(&source, &name, total, &hits))
            })
            .await;
            match answer {
                Some(Ok(t)) => finish(t, ctx),
                Some(Err(e)) => ToolOutput::error(e),
                None => ToolOutput::error("find_references failed internally"),
            }
        })
    }
}
