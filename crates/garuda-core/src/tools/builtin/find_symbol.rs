//! `find_symbol`: definitions by name, best match first, from the client's language servers
//! when it has them, else from the workspace's code index.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::symbols::{MAX_ITEMS, ask_client, finish, with_index};
use crate::code::{CodeIndex, DefHit, find_symbol, index_source, render_defs};
use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util;
use crate::tools::vocab::{SymbolQuery, ToolClass, ToolContext, ToolOutput};

/// The tool's name.
pub(crate) const FIND_SYMBOL: &str = "find_symbol";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    name: String,
    #[serde(default)]
    kind: Option<String>,
}

/// `find_symbol` over a workspace's index.
pub(crate) struct FindSymbol(pub(crate) Arc<CodeIndex>);

impl Tool for FindSymbol {
    fn name(&self) -> &str {
        FIND_SYMBOL
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            FIND_SYMBOL,
            "Find where a function, class, method, type or constant is defined, by name: exact \
             matches first, then matches ignoring case, then names containing it. Answers \
             path:line, the kind, what it sits in and its first line. Covers JavaScript, \
             TypeScript, Rust, Python and Go; faster and more exact than grep.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The symbol's name, or part of it."},
                    "kind": {"type": "string", "description": "Only this kind: function, method, class, interface, struct, enum, trait, type, module, constant."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Search
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::FindSymbol)
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "name").to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match util::parse(FIND_SYMBOL, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let name = input.name.trim().to_string();
            if name.is_empty() {
                return ToolOutput::error("find_symbol needs a `name`");
            }
            let kind = input.kind.filter(|k| !k.trim().is_empty());
            let limit = MAX_ITEMS.min(ctx.limits.max_results);
            let query = SymbolQuery::Definitions {
                name: name.clone(),
                kind: kind.clone(),
                limit,
            };
            if let Some((source, items)) = ask_client(bench, ctx, query).await {
                let hits: Vec<DefHit> = items
                    .into_iter()
                    .map(|s| DefHit {
                        name: s.name.unwrap_or_else(|| name.clone()),
                        kind: s.kind.unwrap_or_else(|| "symbol".into()),
                        container: s.container,
                        path: s.path,
                        line: s.line,
                        end_line: s.end_line,
                        signature: s.text,
                    })
                    .collect();
                let text = render_defs(
                    &format!("language server {source}"),
                    &name,
                    hits.len(),
                    &hits,
                );
                return finish(text, ctx);
            }
            let text = with_index(&self.0, move |st| {
                let (total, hits) = find_symbol(st, &name, kind.as_deref(), limit);
                render_defs(&index_source(st), &name, total, &hits)
            })
            .await;
            match text {
                Some(t) => finish(t, ctx),
                None => ToolOutput::error("find_symbol failed internally"),
            }
        })
    }
}
