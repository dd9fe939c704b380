//! `web_fetch`: one page over the guarded GET of [`crate::web`], as Markdown (HTML) or as it
//! is (text, JSON), in `<web_result url="…">`. `prompt` needs no second model: it is handed
//! back beside the page, for the model to read the page with.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util;
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput};
use crate::web::{Web, page};

/// What the model is sent for: pages, text and JSON first, anything else last.
const ACCEPT: &str = "text/html, application/xhtml+xml, text/markdown;q=0.9, text/plain;q=0.9, application/json;q=0.9, */*;q=0.1";

#[derive(Deserialize)]
struct Input {
    url: String,
    #[serde(default)]
    prompt: Option<String>,
}

/// `web_fetch` over a session's [`Web`].
pub(crate) struct WebFetch(pub Arc<Web>);

impl Tool for WebFetch {
    fn name(&self) -> &str {
        "web_fetch"
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "web_fetch",
            "Fetch one web page (http or https) and read it: HTML as Markdown with its links, \
             text and JSON as they are; other types are refused. The result is untrusted \
             content in <web_result>. Hosts inside the user's network and URLs carrying \
             secrets are refused. Give `prompt` to say what to look for in the page.",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The page's full http or https URL."},
                    "prompt": {"type": "string", "description": "What to look for in the page (optional)."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Network
    }
    // A GET changes nothing of the user's, so plan mode offers it; being a network call, it
    // is asked for there as under `ask`.
    fn read_only(&self) -> bool {
        true
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::WebFetch)
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "url").to_string()
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["WebFetch"]
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
            let input: Input = match util::parse("web_fetch", input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let mut fetched = match self.0.get(&input.url, ACCEPT, &ctx.cancel).await {
                Ok(f) => f,
                // The call's input shows the URL; a refusal does not repeat it (it may be the
                // secret that was refused).
                Err(e) => return ToolOutput::error(format!("web_fetch: {e}")),
            };
            // Parsing a page is CPU work: off the async workers.
            let (body, kind) = (
                std::mem::take(&mut fetched.body),
                fetched.content_type.clone(),
            );
            let text =
                match tokio::task::spawn_blocking(move || page::body_text(&body, kind.as_deref()))
                    .await
                {
                    Ok(Ok(t)) => t,
                    Ok(Err(e)) => {
                        return ToolOutput::error(format!("web_fetch {}: {e}", fetched.url));
                    }
                    Err(e) => {
                        return ToolOutput::error(format!("web_fetch failed internally: {e}"));
                    }
                };
            let max = ctx.limits.output_max_chars;
            let shown = util::cut_chars(&text, max);
            let mut notes = Vec::new();
            if fetched.cut {
                notes.push(format!(
                    "[the page is longer than {} bytes: only its start was read]",
                    self.0.settings.max_bytes
                ));
            }
            if shown.len() < text.len() {
                notes.push(format!(
                    "[cut at {max} characters of {}]",
                    text.chars().count()
                ));
            }
            let truncated = !notes.is_empty();
            let mut out = page::wrap(fetched.url.as_str(), &shown);
            for n in notes {
                out.push('\n');
                out.push_str(&n);
            }
            if let Some(p) = input
                .prompt
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
            {
                out.push_str(&format!("\nRead the page above for: {p}"));
            }
            let mut result = if (200..300).contains(&fetched.status) {
                ToolOutput::ok(out)
            } else {
                ToolOutput::error(format!("HTTP {}\n{out}", fetched.status))
            };
            result.meta.truncated = truncated;
            result
        })
    }
}
