//! Replay: plays recorded responses from a JSONL cassette; and the recorder that writes one.
//!
//! The format is documented in `protocol/REPLAY.md`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{EventSink, ModelRequest, ModelResponse, Provider, ProviderError, StreamEvent};
use crate::message::{Block, Role};

/// Largest cassette read, in bytes (a recorded session of hundreds of turns is a few MiB).
pub const MAX_CASSETTE_BYTES: u64 = 64 << 20;

/// One cassette line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CassetteEntry {
    /// The response to return.
    pub response: ModelResponse,
    /// Text pieces to stream instead of the automatic split of the text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<String>>,
    /// A substring the last user message must contain for this entry to be used.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_text: Option<String>,
}

/// A provider that answers from a cassette, in order.
pub struct ReplayProvider {
    path: PathBuf,
    entries: Vec<CassetteEntry>,
    used: Mutex<Vec<bool>>,
}

impl ReplayProvider {
    /// Loads a cassette file; a malformed line is an error naming its line number. Only a
    /// regular file of at most [`MAX_CASSETTE_BYTES`] is read, opened non-blocking: a pipe
    /// (`/dev/stdin`), a FIFO, a device (`/dev/zero`) or a folder is an error at once, never
    /// a read that waits or grows without end.
    pub fn open(path: &Path) -> Result<Self, ProviderError> {
        let cannot = |why: String| {
            ProviderError::Replay(format!("cannot read cassette {}: {why}", path.display()))
        };
        let (bytes, total) = crate::fsroot::read_regular(path, MAX_CASSETTE_BYTES + 1)
            .map_err(|e| cannot(e.to_string()))?;
        if total > MAX_CASSETTE_BYTES || bytes.len() as u64 > MAX_CASSETTE_BYTES {
            return Err(cannot(format!(
                "larger than {} MiB",
                MAX_CASSETTE_BYTES >> 20
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| cannot(format!("not UTF-8: {e}")))?;
        Self::parse(path, &text)
    }

    /// Parses cassette text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ProviderError> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let entry: CassetteEntry = serde_json::from_str(line).map_err(|e| {
                ProviderError::Replay(format!(
                    "{}:{}: malformed cassette line: {e}",
                    path.display(),
                    i + 1
                ))
            })?;
            entries.push(entry);
        }
        let used = Mutex::new(vec![false; entries.len()]);
        Ok(ReplayProvider {
            path: path.to_path_buf(),
            entries,
            used,
        })
    }

    /// Marks and returns the next entry that fits the request.
    fn take(&self, req: &ModelRequest) -> Result<CassetteEntry, ProviderError> {
        let last_user = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| visible_text(&m.content))
            .unwrap_or_default();
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let pick = self.entries.iter().enumerate().find(|(i, e)| {
            !used[*i]
                && e.match_text
                    .as_deref()
                    .is_none_or(|m| last_user.contains(m))
        });
        match pick {
            Some((i, e)) => {
                used[i] = true;
                Ok(e.clone())
            }
            None if used.iter().all(|u| *u) => Err(ProviderError::Replay(format!(
                "cassette {} is exhausted: all {} responses were used",
                self.path.display(),
                self.entries.len()
            ))),
            None => {
                let mut excerpt: String = last_user.chars().take(80).collect();
                if excerpt.len() < last_user.len() {
                    excerpt.push('…');
                }
                Err(ProviderError::Replay(format!(
                    "cassette {}: no unused response matches the last user message {excerpt:?}",
                    self.path.display()
                )))
            }
        }
    }
}

/// Text of text blocks and of tool results, for `match`.
fn visible_text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Text { text } => {
                out.push_str(text);
                out.push('\n');
            }
            Block::ToolResult { content, .. } => out.push_str(&visible_text(content)),
            _ => {}
        }
    }
    out
}

/// Splits text into up to four pieces at character boundaries.
fn split_text(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(4).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The deltas a live provider would have streamed for a response.
fn events_for(entry: &CassetteEntry) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    let mut chunks_sent = false;
    for b in &entry.response.content {
        match b {
            Block::Text { text } => match &entry.chunks {
                Some(chunks) if !chunks_sent => {
                    chunks_sent = true;
                    out.extend(chunks.iter().cloned().map(StreamEvent::TextDelta));
                }
                Some(_) => {}
                None => out.extend(split_text(text).into_iter().map(StreamEvent::TextDelta)),
            },
            Block::Thinking { thinking, .. } => {
                out.extend(
                    split_text(thinking)
                        .into_iter()
                        .map(StreamEvent::ThinkingDelta),
                );
            }
            Block::ToolUse { id, name, input } => {
                out.push(StreamEvent::ToolUseStart {
                    id: id.clone(),
                    name: name.clone(),
                });
                out.push(StreamEvent::ToolUseInputDelta {
                    id: id.clone(),
                    partial_json: input.to_string(),
                });
            }
            _ => {}
        }
    }
    out.push(StreamEvent::Usage(entry.response.usage));
    out
}

impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    fn complete(
        &self,
        req: ModelRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let taken = self.take(&req);
        let mut used = super::normalize::used_ids(&req.messages);
        Box::pin(async move {
            let entry = taken?;
            for ev in events_for(&entry) {
                if cancel.is_cancelled() {
                    return Err(ProviderError::Cancelled {
                        partial: Vec::new(),
                    });
                }
                let _ = events.send(ev);
                // Let a cancel issued between deltas be seen, as with a live stream.
                tokio::task::yield_now().await;
            }
            if cancel.is_cancelled() {
                return Err(ProviderError::Cancelled {
                    partial: Vec::new(),
                });
            }
            Ok(entry.response.normalized(&mut used))
        })
    }
}

/// Wraps a provider so that each successful response is appended to a cassette at `path`.
pub fn recording(inner: Arc<dyn Provider>, path: PathBuf) -> Arc<dyn Provider> {
    Arc::new(Recorder {
        inner,
        path: Arc::new(path),
        lock: Arc::new(Mutex::new(())),
    })
}

struct Recorder {
    inner: Arc<dyn Provider>,
    path: Arc<PathBuf>,
    lock: Arc<Mutex<()>>,
}

impl Provider for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn complete(
        &self,
        req: ModelRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let fut = self.inner.complete(req, events, cancel);
        let (path, lock) = (self.path.clone(), self.lock.clone());
        Box::pin(async move {
            let resp = fut.await?;
            let entry = CassetteEntry {
                response: resp,
                chunks: None,
                match_text: None,
            };
            let mut line = serde_json::to_string(&entry)
                .map_err(|e| ProviderError::Replay(format!("cannot encode the response: {e}")))?;
            line.push('\n');
            let write = {
                let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path.as_ref())
                    .and_then(|mut f| f.write_all(line.as_bytes()))
            };
            write.map_err(|e| {
                ProviderError::Replay(format!("cannot append to cassette {}: {e}", path.display()))
            })?;
            Ok(entry.response)
        })
    }
}
