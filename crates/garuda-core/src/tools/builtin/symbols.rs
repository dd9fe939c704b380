//! What the code tools share: the client's language servers asked first (when the client
//! declared it can answer), their places made root-relative, and the result cut to the tool
//! output cap whoever answered.

use std::path::Path;
use std::sync::Arc;

use crate::code::{CodeIndex, IndexState};
use crate::fsroot::Root;
use crate::tools::handler::Workbench;
use crate::tools::util;
use crate::tools::vocab::{
    SymbolAnswer, SymbolQuery, SymbolSite, ToolContext, ToolMeta, ToolOutput,
};

/// The most definitions or uses one answer lists.
pub(super) const MAX_ITEMS: usize = 50;

/// The client's answer with only the places inside the root, made root-relative; `None`
/// (fall back to the index) when it cannot answer, fails, times out or finds nothing.
pub(super) async fn ask_client(
    bench: &dyn Workbench,
    ctx: &ToolContext,
    query: SymbolQuery,
) -> Option<(String, Vec<SymbolSite>)> {
    let ask = bench.client_symbols(query)?;
    let answer: Result<SymbolAnswer, String> = tokio::select! {
        a = ask => a,
        _ = ctx.cancel.cancelled() => return None,
    };
    let answer = match answer {
        Ok(a) => a,
        Err(why) => {
            tracing::debug!(
                "the client's language servers gave nothing ({why}): the index answers"
            );
            return None;
        }
    };
    let items: Vec<SymbolSite> = answer
        .items
        .into_iter()
        .filter_map(|mut s| {
            s.path = inside(&ctx.root, &s.path)?;
            Some(s)
        })
        .take(MAX_ITEMS)
        .collect();
    (!items.is_empty()).then_some((answer.source, items))
}

/// `path` (absolute or root-relative) as a root-relative path, when it lies in the root.
fn inside(root: &Root, path: &str) -> Option<String> {
    let p = path.strip_prefix("file://").unwrap_or(path);
    let rel = root.relative(Path::new(p)).ok()?;
    let shown = util::show(&rel);
    (shown != ".").then_some(shown)
}

/// Runs `look` over the index on a blocking thread (a large index takes a moment to scan).
pub(super) async fn with_index<T: Send + 'static>(
    index: &Arc<CodeIndex>,
    look: impl FnOnce(&IndexState) -> T + Send + 'static,
) -> Option<T> {
    let index = index.clone();
    tokio::task::spawn_blocking(move || look(&index.read()))
        .await
        .ok()
}

/// The answer, cut to the tool output cap.
pub(super) fn finish(text: String, ctx: &ToolContext) -> ToolOutput {
    let (text, cut) = util::cap_middle(&text, ctx.limits.output_max_chars);
    ToolOutput::ok(text).with_meta(ToolMeta {
        truncated: cut,
        ..ToolMeta::default()
    })
}
