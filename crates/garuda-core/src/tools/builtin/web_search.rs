//! `web_search`: the user's search backend ([`crate::web::search`]) asked for `query`; the
//! results, a bounded list of title, URL and snippet, in `<web_result>`. Registered only when
//! the user's config names a backend.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util;
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput};
use crate::web::{Web, page, search};

#[derive(Deserialize)]
struct Input {
    query: String,
}

/// `web_search` over a session's [`Web`].
pub(crate) struct WebSearch(pub Arc<Web>);

impl Tool for WebSearch {
    fn name(&self) -> &str {
        "web_search"
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "web_search",
            "Search the web: a list of results (title, URL, snippet) as untrusted content in \
             <web_result>. Read a page with web_fetch before relying on it. Put no code, \
             secrets or file contents in the query.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Network
    }
    // As `web_fetch`: it changes nothing of the user's, and asks as a network call.
    fn read_only(&self) -> bool {
        true
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::WebSearch)
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "query").to_string()
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["WebSearch"]
    }
    fn network_unasked(&self) -> bool {
        self.0.settings.fetch_without_asking
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match util::parse("web_search", input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            if input.query.trim().is_empty() {
                return ToolOutput::error("web_search needs a non-empty query");
            }
            match self.0.search(input.query.trim(), &ctx.cancel).await {
                Ok((url, hits)) => {
                    let list = util::cut_chars(&search::render(&hits), ctx.limits.output_max_chars);
                    ToolOutput::ok(page::wrap(url.as_str(), &list))
                }
                Err(e) => ToolOutput::error(format!("web_search: {e}")),
            }
        })
    }
}

/// `web_search` as the provider's own server tool (Anthropic's `web_search_20250305`): the
/// request carries the provider's definition, the model's searches run on the provider and
/// come back as provider blocks in its answer. Garuda never runs a call of it.
pub(crate) struct ServerWebSearch(pub Value);

impl Tool for ServerWebSearch {
    fn name(&self) -> &str {
        "web_search"
    }
    fn spec(&self) -> ToolSpec {
        ToolSpec::provider("web_search", self.0.clone())
    }
    fn class(&self) -> ToolClass {
        ToolClass::Network
    }
    fn kind(&self) -> crate::tools::vocab::ToolKind {
        crate::tools::vocab::ToolKind::Search
    }
    fn read_only(&self) -> bool {
        true
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::WebSearch)
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "query").to_string()
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["WebSearch"]
    }
    fn run<'a>(
        &'a self,
        _input: Value,
        _ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        // Only a model on another wire could send this as a client call (a switched model).
        Box::pin(async {
            ToolOutput::error(
                "web_search runs on the provider's side and is not available with this model",
            )
        })
    }
}
