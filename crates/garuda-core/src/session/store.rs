//! Append-only JSONL transcript files, one per session, under a caller-given directory.
//!
//! Layout: `<base>/<sessionId>.jsonl`, side files for oversized tool results in
//! `<base>/tool-results/<sessionId>/<toolUseId>.txt`. A file is only ever appended to; each
//! record is one `write_all` of one line, so a crash leaves at most a torn last line, which
//! loading ignores.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::records::{
    ForkOrigin, InstallAbortedRecord, ParsedLine, Record, SessionHeader, SessionOrigin, new_id,
    now_ms, parse_line,
};
use crate::message::{Block, Role};

/// Errors of the transcript store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// File system failure.
    #[error("transcript io error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// No transcript with this id.
    #[error("session not found: {0}")]
    NotFound(String),
    /// The id is not a session id (a UUID in its canonical lowercase form); holds the id as
    /// shown (quoted, escaped, cut).
    #[error(
        "invalid session id {0}: a session id is a UUID such as 01a22afd-7749-750f-a192-51d5a23ec03e"
    )]
    InvalidId(String),
    /// The fork point is not a message of the session.
    #[error("message {0} not found in session")]
    MessageNotFound(String),
    /// A session with this id already exists.
    #[error("session already exists: {0}")]
    Exists(String),
    /// A record could not be serialized.
    #[error("cannot serialize record: {0}")]
    Serialize(#[from] serde_json::Error),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Like `io_err`, but a missing transcript file means the session does not exist.
fn session_err<'a>(id: &'a str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            StoreError::NotFound(id.to_string())
        } else {
            io_err(path)(source)
        }
    }
}

/// The directory of all transcripts of one workspace.
#[derive(Debug, Clone)]
pub struct SessionStore {
    base: PathBuf,
}

/// An open transcript, for appending.
#[derive(Debug)]
pub struct SessionFile {
    id: String,
    path: PathBuf,
    file: File,
}

/// A transcript read back from disk.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The first line.
    pub header: SessionHeader,
    /// Every later record that parsed, in file order.
    pub records: Vec<Record>,
    /// Lines skipped (garbage, unknown types, torn tail), for logging.
    pub warnings: Vec<String>,
    /// True when the last line was torn (no newline or unparsable).
    pub torn_tail: bool,
    /// The boundary of a compaction whose installation the file holds only in part.
    pub incomplete_install: Option<String>,
    /// True when the header line was missing or damaged and `header` was rebuilt from what
    /// was left of it and from the records (see [`recover_header`]).
    pub header_recovered: bool,
}

/// A line of `session/list`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// Creation time, unix ms.
    pub created: u64,
    /// Model spec.
    pub model: String,
    /// Workspace root from the header.
    pub workspace_root: String,
    /// Number of message records.
    pub message_count: usize,
    /// Excerpt of the first user text.
    pub title: Option<String>,
    /// The parent session when forked.
    pub forked_from: Option<String>,
    /// The header line was missing or damaged: the fields are what could be recovered
    /// (an empty `workspace_root` when even that was lost).
    pub damaged: bool,
    /// The front that created it.
    pub origin: SessionOrigin,
    /// Time of the last record, unix ms (the creation time when nothing followed the header).
    pub updated: u64,
    /// For an agent's sub-session: the calling session, its tool call, and the agent.
    pub parent: Option<ParentRef>,
}

/// The session and tool call an agent's sub-session answered, as listings show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParentRef {
    /// The calling session.
    pub session_id: String,
    /// The tool call whose result the sub-session gave.
    pub tool_call_id: String,
    /// The agent's name.
    pub agent: String,
}

impl ParentRef {
    fn of(link: &super::records::ParentLink) -> ParentRef {
        ParentRef {
            session_id: link.session_id.clone(),
            tool_call_id: link.tool_call_id.clone(),
            agent: link.agent.clone(),
        }
    }
}

const TITLE_CHARS: usize = 80;

/// True for a session id: a UUID in the canonical form Garuda writes (lowercase, hyphenated),
/// so a path built from it is one plain file name, and a file planted in the sessions folder
/// under any other name is never taken for a session.
pub fn is_session_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|u| u.hyphenated().to_string() == id)
}

/// Refuses an id that is not a session id, before any path is built from it.
pub(crate) fn check_id(id: &str) -> Result<(), StoreError> {
    if is_session_id(id) {
        Ok(())
    } else {
        Err(StoreError::InvalidId(shown_id(id)))
    }
}

/// An id for an error message: quoted and escaped (`{:?}` escapes control and format
/// characters), at most 80 characters of it.
fn shown_id(id: &str) -> String {
    let cut: String = id.chars().take(80).collect();
    let more = if cut.len() < id.len() { "…" } else { "" };
    format!("{cut:?}{more}")
}

fn record_line(record: &Record) -> Result<Vec<u8>, StoreError> {
    let mut line = serde_json::to_vec(record)?;
    line.push(b'\n');
    Ok(line)
}

impl SessionStore {
    /// A store rooted at `base` (created on first write).
    pub fn new(base: impl Into<PathBuf>) -> Self {
        SessionStore { base: base.into() }
    }

    /// The base directory.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Path of a session's transcript.
    pub fn path_of(&self, id: &str) -> PathBuf {
        self.base.join(format!("{id}.jsonl"))
    }

    /// Whether a transcript with this id exists.
    pub fn exists(&self, id: &str) -> Result<bool, StoreError> {
        check_id(id)?;
        let path = self.path_of(id);
        path.try_exists().map_err(io_err(&path))
    }

    /// Directory of a session's oversized tool results.
    pub fn tool_results_dir(&self, id: &str) -> PathBuf {
        self.base.join("tool-results").join(id)
    }

    /// Path of one oversized tool result's side file.
    pub fn tool_result_path(&self, id: &str, tool_use_id: &str) -> PathBuf {
        self.tool_results_dir(id)
            .join(super::view::tool_result_file_name(tool_use_id))
    }

    /// The default view policy of a session, with its side-file directory filled in.
    pub fn view_policy(&self, id: &str) -> super::view::ViewPolicy {
        super::view::ViewPolicy {
            tool_results_dir: self.tool_results_dir(id),
            ..Default::default()
        }
    }

    /// Writes a side file for an oversized tool result (create or replace; not a transcript).
    pub fn write_tool_result(
        &self,
        id: &str,
        tool_use_id: &str,
        text: &str,
    ) -> Result<PathBuf, StoreError> {
        check_id(id)?;
        let dir = self.tool_results_dir(id);
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let path = self.tool_result_path(id, tool_use_id);
        fs::write(&path, text).map_err(io_err(&path))?;
        Ok(path)
    }

    /// Creates a new transcript whose first line is `header`.
    pub fn create(&self, header: &SessionHeader) -> Result<SessionFile, StoreError> {
        check_id(&header.session_id)?;
        fs::create_dir_all(&self.base).map_err(io_err(&self.base))?;
        let path = self.path_of(&header.session_id);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    StoreError::Exists(header.session_id.clone())
                } else {
                    StoreError::Io {
                        path: path.clone(),
                        source: e,
                    }
                }
            })?;
        let mut f = SessionFile {
            id: header.session_id.clone(),
            path,
            file,
        };
        f.append(&Record::Header(header.clone()))?;
        Ok(f)
    }

    /// Opens an existing transcript for appending. A torn last line gets a newline first, so
    /// the next record starts on a line of its own.
    pub fn open(&self, id: &str) -> Result<SessionFile, StoreError> {
        check_id(id)?;
        let path = self.path_of(id);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(session_err(id, &path))?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1)).map_err(io_err(&path))?;
            file.read_exact(&mut last).map_err(io_err(&path))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(io_err(&path))?;
            }
        }
        Ok(SessionFile {
            id: id.to_string(),
            path,
            file,
        })
    }

    /// Loads and opens a session for continuing it: repairs a torn tail and marks a torn
    /// compaction installation with an `install_aborted` record, so every later load agrees.
    pub fn resume(&self, id: &str) -> Result<(SessionFile, Loaded), StoreError> {
        let loaded = self.load(id)?;
        self.reopen(id, loaded)
    }

    /// [`Self::resume`] of a transcript already read with [`Self::load`] (the caller looked
    /// at it first, and it is not read twice).
    pub fn reopen(
        &self,
        id: &str,
        mut loaded: Loaded,
    ) -> Result<(SessionFile, Loaded), StoreError> {
        let mut file = self.open(id)?;
        if let Some(boundary_id) = loaded.incomplete_install.take() {
            let rec = Record::InstallAborted(InstallAbortedRecord {
                uuid: new_id(),
                time: now_ms(),
                boundary_id,
            });
            file.append(&rec)?;
            file.sync()?;
            loaded.records.push(rec);
        }
        Ok((file, loaded))
    }

    /// Reads a transcript, streaming line by line. Bad lines are skipped with a warning; the
    /// last line is ignored when torn.
    pub fn load(&self, id: &str) -> Result<Loaded, StoreError> {
        check_id(id)?;
        let path = self.path_of(id);
        let file = File::open(&path).map_err(session_err(id, &path))?;
        let mut reader = BufReader::with_capacity(256 * 1024, file);
        let mut buf = Vec::new();
        let mut header = None;
        let mut records = Vec::new();
        let mut warnings = Vec::new();
        let mut torn_tail = false;
        let mut line_no = 0usize;
        // The first non-blank line when it is not a header: what is left of a damaged one.
        let mut damaged_first: Option<String> = None;
        let mut seen_first = false;
        loop {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf).map_err(io_err(&path))?;
            if n == 0 {
                break;
            }
            line_no += 1;
            let complete = buf.last() == Some(&b'\n');
            let text = String::from_utf8_lossy(&buf);
            let trimmed = text.trim();
            if trimmed.is_empty() {
                continue;
            }
            let parsed = parse_line(trimmed);
            let whole_record = complete && matches!(parsed, ParsedLine::Record(_));
            let is_header =
                matches!(&parsed, ParsedLine::Record(r) if matches!(**r, Record::Header(_)));
            let first = !std::mem::replace(&mut seen_first, true);
            if first && !(whole_record && is_header) {
                warnings.push(format!("line {line_no}: damaged session header"));
                if !whole_record {
                    // What is left of the header: its fields are salvaged below.
                    damaged_first = Some(trimmed.to_string());
                    continue;
                }
            }
            match parsed {
                ParsedLine::Record(r) if complete => match *r {
                    Record::Header(h) if header.is_none() => header = Some(h),
                    Record::Header(_) => {
                        warnings.push(format!("line {line_no}: extra header skipped"))
                    }
                    other => records.push(other),
                },
                ParsedLine::Record(_) => {
                    // A complete JSON object without its newline: the crash hit between the
                    // object and the newline. Keep nothing that was not fully written.
                    torn_tail = true;
                    warnings.push(format!("line {line_no}: torn last line ignored"));
                }
                ParsedLine::Unknown(ty) => warnings.push(format!(
                    "line {line_no}: unknown record type {ty:?} skipped"
                )),
                ParsedLine::Invalid(e) => {
                    if complete {
                        warnings.push(format!("line {line_no}: invalid record skipped: {e}"));
                    } else {
                        torn_tail = true;
                        warnings.push(format!("line {line_no}: torn last line ignored"));
                    }
                }
            }
        }
        let header_recovered = header.is_none();
        let header = match header {
            Some(h) => h,
            None => {
                warnings.push("session header rebuilt from what was left of it".to_string());
                let mtime = fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as u64);
                recover_header(id, damaged_first.as_deref(), &records, mtime)
            }
        };
        let incomplete_install = find_incomplete_install(&records);
        for w in &warnings {
            tracing::warn!(session = id, "{w}");
        }
        Ok(Loaded {
            header,
            records,
            warnings,
            torn_tail,
            incomplete_install,
            header_recovered,
        })
    }

    /// Summaries of every session in the store, newest first. Answers from the index
    /// (`<base>/.index.json`): a transcript unchanged since it was indexed is not read at
    /// all, one that grew is read only from where the index stopped (transcripts are
    /// append-only), and a new or replaced one is read once. The index is a cache, checked
    /// against each file's inode, length and modification time; a missing or unreadable
    /// index only costs a full read.
    pub fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let entries = match fs::read_dir(&self.base) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(StoreError::Io {
                    path: self.base.clone(),
                    source: e,
                });
            }
        };
        let index_path = self.base.join(INDEX_FILE);
        let old: Index = fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|i: &Index| i.version == INDEX_VERSION)
            .unwrap_or_default();
        let mut index = Index {
            version: INDEX_VERSION,
            ..Index::default()
        };
        let mut changed = false;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err(&self.base))?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            let Some(id) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if check_id(id).is_err() {
                continue;
            }
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            let stamp = Stamp::of(&meta);
            let cached = old.sessions.get(id);
            let fresh = match cached {
                Some(c) if c.stamp == stamp => Some(c.clone()),
                Some(c)
                    if c.stamp.ino == stamp.ino
                        && c.stamp.len < stamp.len
                        && !c.summary.damaged =>
                {
                    // Grown since: read only the new lines.
                    let mut c = c.clone();
                    match summarize_from(&path, &mut c) {
                        Ok(true) => {
                            c.stamp = stamp;
                            Some(c)
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            let item = match fresh {
                Some(item) => item,
                None => {
                    let mut item = Indexed::new(stamp);
                    match summarize_from(&path, &mut item) {
                        Ok(true) => item,
                        Ok(false) => {
                            tracing::warn!(path = %path.display(), "damaged session header; recovering");
                            match self.load(id) {
                                Ok(l) => Indexed {
                                    stamp,
                                    parsed: 0,
                                    summary: summary_of_loaded(&l),
                                },
                                Err(e) => {
                                    tracing::warn!("{e}");
                                    continue;
                                }
                            }
                        }
                        Err(e) => {
                            tracing::warn!("{e}");
                            continue;
                        }
                    }
                }
            };
            changed |= cached != Some(&item);
            out.push(item.summary.clone());
            index.sessions.insert(id.to_string(), item);
        }
        changed |= index.sessions.len() != old.sessions.len();
        if changed {
            // Best effort: a failed write only means the next listing reads more.
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tmp = self
                .base
                .join(format!("{INDEX_FILE}.{}.{seq}.tmp", std::process::id()));
            let written = serde_json::to_vec(&index).ok().is_some_and(|b| {
                fs::write(&tmp, b).is_ok() && fs::rename(&tmp, &index_path).is_ok()
            });
            if !written {
                let _ = fs::remove_file(&tmp);
                tracing::debug!("session index not written");
            }
        }
        sort_newest_first(&mut out);
        Ok(out)
    }

    /// Sessions of one workspace root (the header's `workspaceRoot`), and damaged sessions
    /// whose root was lost (they belong to no workspace, so every list shows them).
    pub fn list_workspace(&self, root: &str) -> Result<Vec<SessionSummary>, StoreError> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|s| s.workspace_root == root || (s.damaged && s.workspace_root.is_empty()))
            .collect())
    }

    /// Removes a transcript and its side files.
    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        check_id(id)?;
        let path = self.path_of(id);
        fs::remove_file(&path).map_err(session_err(id, &path))?;
        let dir = self.tool_results_dir(id);
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io {
                path: dir,
                source: e,
            }),
        }
    }

    /// Copies a session's records up to and including `at_message_id` (all when None) into a
    /// new session whose header names its origin. Returns the new id.
    pub fn fork(&self, id: &str, at_message_id: Option<&str>) -> Result<String, StoreError> {
        let loaded = self.load(id)?;
        let mut end = loaded.records.len();
        if let Some(at) = at_message_id {
            end = loaded
                .records
                .iter()
                .position(|r| matches!(r, Record::Message(m) if m.uuid == at))
                .map(|i| i + 1)
                .ok_or_else(|| StoreError::MessageNotFound(at.to_string()))?;
            // Keep the usage record of the fork point so token accounting carries over.
            while let Some(Record::Usage(u)) = loaded.records.get(end) {
                if u.message_id != at {
                    break;
                }
                end += 1;
            }
        }
        let mut header = loaded.header.clone();
        header.uuid = new_id();
        header.time = now_ms();
        header.session_id = uuid::Uuid::now_v7().to_string();
        header.forked_from = Some(ForkOrigin {
            session_id: id.to_string(),
            message_id: at_message_id.map(str::to_string),
        });
        let mut file = self.create(&header)?;
        file.append_batch(&loaded.records[..end])?;
        file.sync()?;
        Ok(header.session_id)
    }
}

/// A header for a transcript whose header line is missing or damaged: the session id is the
/// file's name; the root, model, policy and record id are read from what is left of the
/// damaged line when they still parse as JSON strings there; the time is the first record's
/// (else the file's modification time). A lost root stays empty and a lost model is empty
/// (the engine then uses the configured model).
pub fn recover_header(
    id: &str,
    damaged: Option<&str>,
    records: &[Record],
    mtime_ms: u64,
) -> SessionHeader {
    let field = |key: &str| damaged.and_then(|line| salvage_string(line, key));
    SessionHeader {
        uuid: field("uuid").unwrap_or_else(new_id),
        time: records
            .iter()
            .map(Record::time)
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(mtime_ms),
        version: 1,
        session_id: id.to_string(),
        workspace_root: field("workspaceRoot").unwrap_or_default(),
        model: field("model").unwrap_or_default(),
        policy: field("policy"),
        forked_from: None,
        // Lost with the header when it was damaged; an editor session is the safe reading.
        origin: field("origin")
            .and_then(|o| serde_json::from_value(serde_json::Value::String(o)).ok())
            .unwrap_or_default(),
        parent: None,
    }
}

/// The JSON string value of `"key":` in a line that is not valid JSON as a whole.
fn salvage_string(line: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":");
    let start = line.find(&pat)? + pat.len();
    let rest = line[start..].trim_start();
    serde_json::Deserializer::from_str(rest)
        .into_iter::<String>()
        .next()?
        .ok()
}

fn summary_of_loaded(l: &Loaded) -> SessionSummary {
    let messages = l.records.iter().filter_map(Record::as_message);
    let title = messages
        .clone()
        .find(|m| m.role == Role::User && m.meta.is_none() && !m.is_virtual && m.copy_of.is_none())
        .and_then(|m| first_words(&m.content))
        .map(|t| excerpt(&t, TITLE_CHARS));
    SessionSummary {
        id: l.header.session_id.clone(),
        created: l.header.time,
        model: l.header.model.clone(),
        workspace_root: l.header.workspace_root.clone(),
        message_count: messages.count(),
        title,
        forked_from: l.header.forked_from.as_ref().map(|f| f.session_id.clone()),
        damaged: l.header_recovered,
        origin: l.header.origin,
        parent: l.header.parent.as_ref().map(ParentRef::of),
        updated: l
            .records
            .iter()
            .map(Record::time)
            .max()
            .unwrap_or(0)
            .max(l.header.time),
    }
}

/// Most recently active first; ids (time-ordered UUIDv7) break ties, newest first.
pub fn sort_newest_first(list: &mut [SessionSummary]) {
    list.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| b.id.cmp(&a.id)));
}

/// A boundary at the tail whose batch of `install_count` records did not fully reach disk.
fn find_incomplete_install(records: &[Record]) -> Option<String> {
    let (i, b) = records
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, r)| match r {
            Record::CompactBoundary(b) => Some((i, b)),
            _ => None,
        })?;
    let after = &records[i + 1..];
    let aborted = after
        .iter()
        .any(|r| matches!(r, Record::InstallAborted(a) if a.boundary_id == b.uuid));
    (!aborted && after.len() < b.install_count as usize).then(|| b.uuid.clone())
}

/// The session index's file name in the store's folder (not `.jsonl`, so never listed).
const INDEX_FILE: &str = ".index.json";
/// Bumped when the index's meaning changes; an index of another version is rebuilt.
const INDEX_VERSION: u32 = 3;

/// The listing cache: one entry per transcript, valid while the file's stamp is unchanged.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Index {
    version: u32,
    sessions: std::collections::HashMap<String, Indexed>,
}

/// What identifies a transcript's content at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Indexed {
    stamp: Stamp,
    /// Bytes summarized: the end of the last complete line read.
    parsed: u64,
    #[serde(with = "summary_serde")]
    summary: SessionSummary,
}

impl Indexed {
    fn new(stamp: Stamp) -> Indexed {
        Indexed {
            stamp,
            parsed: 0,
            summary: SessionSummary {
                id: String::new(),
                created: 0,
                model: String::new(),
                workspace_root: String::new(),
                message_count: 0,
                title: None,
                forked_from: None,
                damaged: false,
                origin: SessionOrigin::Serve,
                updated: 0,
                parent: None,
            },
        }
    }
}

/// `SessionSummary` is an engine type without serde; the index stores it as a tuple.
mod summary_serde {
    use super::{ParentRef, SessionOrigin, SessionSummary};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    type Repr = (
        String,
        u64,
        String,
        String,
        usize,
        Option<String>,
        Option<String>,
        bool,
        SessionOrigin,
        u64,
        Option<ParentRef>,
    );

    pub(crate) fn serialize<S: Serializer>(s: &SessionSummary, ser: S) -> Result<S::Ok, S::Error> {
        (
            &s.id,
            s.created,
            &s.model,
            &s.workspace_root,
            s.message_count,
            &s.title,
            &s.forked_from,
            s.damaged,
            s.origin,
            s.updated,
            &s.parent,
        )
            .serialize(ser)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SessionSummary, D::Error> {
        let (
            id,
            created,
            model,
            workspace_root,
            message_count,
            title,
            forked_from,
            damaged,
            origin,
            updated,
            parent,
        ) = Repr::deserialize(d)?;
        Ok(SessionSummary {
            id,
            created,
            model,
            workspace_root,
            message_count,
            title,
            forked_from,
            damaged,
            origin,
            updated,
            parent,
        })
    }
}

/// Reads `path` from `item.parsed` on, updating its summary (header, message count, title).
/// Returns false when the file has no valid header (the caller recovers it).
fn summarize_from(path: &Path, item: &mut Indexed) -> Result<bool, StoreError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    file.seek(SeekFrom::Start(item.parsed))
        .map_err(io_err(path))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::new();
    let mut has_header = item.parsed > 0;
    let mut last = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            break; // torn tail: read again once it is whole
        }
        if !has_header {
            if let ParsedLine::Record(r) = parse_line(&String::from_utf8_lossy(&buf))
                && let Record::Header(h) = *r
            {
                let s = &mut item.summary;
                s.id = h.session_id;
                s.created = h.time;
                s.model = h.model;
                s.workspace_root = h.workspace_root;
                s.forked_from = h.forked_from.map(|f| f.session_id);
                s.origin = h.origin;
                s.parent = h.parent.as_ref().map(ParentRef::of);
                s.updated = s.updated.max(h.time);
                has_header = true;
                item.parsed += n as u64;
                continue;
            }
            return Ok(false);
        }
        item.parsed += n as u64;
        // The tag is serialized first, so a prefix test counts messages without parsing.
        if buf.starts_with(br#"{"type":"message""#) {
            item.summary.message_count += 1;
            if item.summary.title.is_none()
                && contains(&buf, br#""role":"user""#)
                && let ParsedLine::Record(r) = parse_line(&String::from_utf8_lossy(&buf))
                && let Record::Message(m) = *r
                && m.role == Role::User
                && m.meta.is_none()
                && !m.is_virtual
                && m.copy_of.is_none()
            {
                item.summary.title = first_words(&m.content).map(|t| excerpt(&t, TITLE_CHARS));
            }
        }
        if !buf.trim_ascii().is_empty() {
            std::mem::swap(&mut buf, &mut last);
        }
    }
    if let Some(t) = record_time(&last) {
        item.summary.updated = item.summary.updated.max(t);
    }
    Ok(has_header)
}

/// The `time` of a record line, whatever its type.
fn record_time(line: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Timed {
        time: Option<u64>,
    }
    serde_json::from_slice::<Timed>(line).ok()?.time
}

/// Blocks Garuda or a client adds around the user's words; a title skips them.
const INJECTED_TAGS: &[&str] = &[
    "garuda_note",
    "context",
    "restored_file",
    "summary",
    "system-reminder",
    "first_user_request",
    "user_messages",
];

/// `text` without the injected blocks it opens with (`<garuda_note>…</garuda_note>`,
/// `<context path=…>…</context>`, …).
fn strip_injected(mut text: &str) -> &str {
    loop {
        let t = text.trim_start();
        let Some(tag) = INJECTED_TAGS.iter().find(|tag| {
            t.strip_prefix('<')
                .and_then(|r| r.strip_prefix(**tag))
                .is_some_and(|r| r.starts_with('>') || r.starts_with(' '))
        }) else {
            return t;
        };
        let close = format!("</{tag}>");
        match t.find(&close) {
            Some(i) => text = &t[i + close.len()..],
            // Unclosed: the whole block is injected.
            None => return "",
        }
    }
}

/// True for a text block that carries something attached to the user's words rather than the
/// words: a resource named in brackets (`[resource: …]`, as the ACP front writes one), or a
/// lead-in line ending in `:` over more lines (`Sharing AGENTS.md:` and the file, as an ACP
/// client such as CodeCompanion.nvim sends a rule or buffer it shares).
fn attached(words: &str) -> bool {
    let t = words.trim();
    if t.starts_with("[resource:") || t.starts_with("[binary resource") {
        return true;
    }
    match t.split_once('\n') {
        Some((first, rest)) => first.trim_end().ends_with(':') && !rest.trim().is_empty(),
        None => false,
    }
}

/// The user's own first words in a message: its first text that is not an injected block nor,
/// when the message has another text, an attachment; a message of attachments only is named by
/// its first.
fn first_words(blocks: &[Block]) -> Option<String> {
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(strip_injected(text)),
            _ => None,
        })
        .filter(|w| !w.trim().is_empty())
        .collect();
    texts
        .iter()
        .find(|w| !attached(w))
        .or(texts.first())
        .map(|w| w.to_string())
}

/// The title a session gets from the blocks of its first user message: the user's own words,
/// on one line, cut as `session/list` shows it.
pub fn title_of_blocks(blocks: &[Block]) -> Option<String> {
    first_words(blocks).map(|t| excerpt(&t, TITLE_CHARS))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The first `max` characters of `text` on one line, with an ellipsis when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max).collect();
        s.push('…');
        s
    }
}

impl SessionFile {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The transcript path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one line, in one write.
    pub fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        let line = record_line(record)?;
        self.file.write_all(&line).map_err(io_err(&self.path))?;
        self.file.flush().map_err(io_err(&self.path))
    }

    /// Appends several records in one write (a compaction installation).
    pub fn append_batch(&mut self, records: &[Record]) -> Result<(), StoreError> {
        let mut buf = Vec::new();
        for r in records {
            buf.extend_from_slice(&record_line(r)?);
        }
        self.file.write_all(&buf).map_err(io_err(&self.path))?;
        self.file.flush().map_err(io_err(&self.path))
    }

    /// Forces the appended data to disk.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(io_err(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::records::{CompactBoundaryRecord, CompactTrigger, MessageRecord};

    fn msg(role: Role, text: &str) -> Record {
        Record::Message(MessageRecord::new(role, vec![Block::text(text)], None))
    }

    fn setup() -> (tempfile::TempDir, SessionStore, SessionHeader) {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path().join("sessions"));
        let header = SessionHeader::new("/ws", "replay:x");
        (dir, store, header)
    }

    #[test]
    fn append_load_round_trip() {
        let (_d, store, header) = setup();
        let mut f = store.create(&header).unwrap();
        let recs = vec![msg(Role::User, "hello"), msg(Role::Assistant, "hi")];
        for r in &recs {
            f.append(r).unwrap();
        }
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.header, header);
        assert_eq!(l.records, recs);
        assert!(l.warnings.is_empty());
        assert!(!l.torn_tail);
        assert!(matches!(store.create(&header), Err(StoreError::Exists(_))));
    }

    #[test]
    fn torn_last_line_is_ignored_and_repaired_on_open() {
        let (_d, store, header) = setup();
        let mut f = store.create(&header).unwrap();
        let a = msg(Role::User, "kept");
        f.append(&a).unwrap();
        let line = record_line(&msg(Role::Assistant, "torn")).unwrap();
        f.file.write_all(&line[..line.len() / 2]).unwrap();
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.records, vec![a.clone()]);
        assert!(l.torn_tail);
        // A complete object without its newline is torn too.
        let mut f = store.open(&header.session_id).unwrap();
        let b = msg(Role::User, "after");
        f.append(&b).unwrap();
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.records, vec![a, b]);
        assert!(!l.torn_tail);
        assert_eq!(l.warnings.len(), 1);
    }

    #[test]
    fn garbage_middle_line_loses_nothing_else() {
        let (_d, store, header) = setup();
        let mut f = store.create(&header).unwrap();
        let a = msg(Role::User, "a");
        let b = msg(Role::Assistant, "b");
        f.append(&a).unwrap();
        f.file.write_all(b"{garbage\n").unwrap();
        f.file
            .write_all(b"{\"type\":\"from_the_future\",\"uuid\":\"x\",\"time\":1}\n")
            .unwrap();
        f.append(&b).unwrap();
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.records, vec![a, b]);
        assert_eq!(l.warnings.len(), 2);
        assert!(l.warnings[1].contains("from_the_future"));
    }

    fn write_raw(store: &SessionStore, id: &str, bytes: &[u8]) {
        fs::create_dir_all(store.base()).unwrap();
        fs::write(store.path_of(id), bytes).unwrap();
    }

    fn transcript(header: &SessionHeader, recs: &[Record]) -> Vec<u8> {
        let mut out = record_line(&Record::Header(header.clone())).unwrap();
        for r in recs {
            out.extend(record_line(r).unwrap());
        }
        out
    }

    #[test]
    fn a_damaged_header_is_rebuilt_and_the_session_stays_listed() {
        let (_d, store, header) = setup();
        let recs = vec![msg(Role::User, "the question"), msg(Role::Assistant, "b")];
        let good = transcript(&header, &recs);
        let first_nl = good.iter().position(|&b| b == b'\n').unwrap();
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        // One bad byte at the start, in the middle and at the end of the header line.
        // A structural byte mid-line (a byte inside a string value would still parse).
        let mid = first_nl / 2
            + good[first_nl / 2..first_nl]
                .iter()
                .position(|&c| c == b',')
                .unwrap();
        for at in [0, mid, first_nl - 1] {
            let mut b = good.clone();
            b[at] = b'#';
            cases.push(("bad byte", b));
        }
        let mut b = good.clone();
        b[first_nl / 2] = 0xFF;
        b.insert(first_nl / 2, b'"');
        cases.push(("invalid UTF-8 and a stray quote", b));
        cases.push(("header line gone", good[first_nl + 1..].to_vec()));
        cases.push((
            "header line blank",
            [b"\n".as_slice(), &good[first_nl + 1..]].concat(),
        ));
        cases.push((
            "NUL bytes",
            [vec![0u8; 40], good[first_nl..].to_vec()].concat(),
        ));
        for (what, bytes) in cases {
            write_raw(&store, &header.session_id, &bytes);
            let l = store
                .load(&header.session_id)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(l.header_recovered, "{what}");
            assert_eq!(l.records, recs, "{what}");
            assert_eq!(l.header.session_id, header.session_id, "{what}");
            let list = store.list().unwrap();
            assert_eq!(list.len(), 1, "{what}");
            assert!(list[0].damaged, "{what}");
            assert_eq!(list[0].message_count, 2, "{what}");
            assert_eq!(list[0].title.as_deref(), Some("the question"), "{what}");
            // A listed session can be continued: its file opens for appending.
            store.resume(&header.session_id).unwrap();
        }
        // A bad byte away from the root and the model keeps both.
        let mut b = good.clone();
        b[1] = b'#';
        write_raw(&store, &header.session_id, &b);
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.header.workspace_root, "/ws");
        assert_eq!(l.header.model, "replay:x");
        assert_eq!(store.list_workspace("/ws").unwrap().len(), 1);
        assert!(store.list_workspace("/other").unwrap().is_empty());
    }

    #[test]
    fn an_empty_transcript_is_listed_as_damaged_everywhere() {
        let (_d, store, header) = setup();
        write_raw(&store, &header.session_id, b"");
        let l = store.load(&header.session_id).unwrap();
        assert!(l.header_recovered && l.records.is_empty());
        assert_eq!(l.header.workspace_root, "");
        for root in ["/ws", "/other"] {
            let list = store.list_workspace(root).unwrap();
            assert_eq!(list.len(), 1);
            assert!(list[0].damaged);
        }
    }

    /// Defect: `session/list` read every line of every transcript on every call. Now an
    /// unchanged transcript is answered from the index without being read, and a grown one
    /// is read only from where the index stopped.
    #[test]
    fn listing_answers_from_the_index() {
        let (_d, store, header) = setup();
        let mut f = store.create(&header).unwrap();
        f.append(&msg(Role::User, "first")).unwrap();
        assert_eq!(store.list().unwrap()[0].message_count, 1);
        let index_path = store.base().join(INDEX_FILE);
        let mut index: Index = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
        let entry = index.sessions.get_mut(&header.session_id).unwrap();
        assert_eq!(
            entry.parsed,
            fs::metadata(store.path_of(&header.session_id))
                .unwrap()
                .len()
        );
        // A planted count proves the unchanged file is not read again.
        entry.summary.message_count = 99;
        fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
        assert_eq!(store.list().unwrap()[0].message_count, 99);
        // A grown file is read from where the index stopped: the planted count goes on.
        f.append(&msg(Role::Assistant, "more")).unwrap();
        let l = store.list().unwrap();
        assert_eq!(l[0].message_count, 100);
        assert_eq!(l[0].title.as_deref(), Some("first"));
        // A garbage index is rebuilt from the files.
        fs::write(&index_path, b"{not json").unwrap();
        assert_eq!(store.list().unwrap()[0].message_count, 2);
        // A torn tail is not counted until it is whole.
        f.file
            .write_all(&record_line(&msg(Role::User, "x")).unwrap()[..10])
            .unwrap();
        assert_eq!(store.list().unwrap()[0].message_count, 2);
    }

    #[test]
    fn session_ids_are_canonical_uuids() {
        assert!(is_session_id(&uuid::Uuid::now_v7().to_string()));
        assert!(is_session_id("01a22afd-7749-750f-a192-51d5a23ec03e"));
        for bad in [
            "",
            "evil",
            "../01a22afd-7749-750f-a192-51d5a23ec03e",
            "01a22afd-7749-750f-a192-51d5a23ec03e/../x",
            "01A22AFD-7749-750F-A192-51D5A23EC03E",
            "01a22afd7749750fa19251d5a23ec03e",
            "{01a22afd-7749-750f-a192-51d5a23ec03e}",
            "urn:uuid:01a22afd-7749-750f-a192-51d5a23ec03e",
            "01a22afd-7749-750f-a192-51d5a23ec03e ",
        ] {
            assert!(!is_session_id(bad), "{bad:?}");
        }
        let e = check_id("../x\u{202e}").unwrap_err().to_string();
        assert!(e.contains("a UUID"), "{e}");
    }

    #[test]
    fn a_planted_file_is_no_session() {
        let (_d, store, header) = setup();
        store.create(&header).unwrap();
        // A transcript under a name that is not a UUID, beside a real one.
        let planted = store.base().join("planted.jsonl");
        std::fs::copy(store.path_of(&header.session_id), &planted).unwrap();
        let ids: Vec<_> = store.list().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![header.session_id.clone()]);
        assert!(matches!(
            store.load("planted"),
            Err(StoreError::InvalidId(_))
        ));
        assert!(matches!(
            store.fork("planted", None),
            Err(StoreError::InvalidId(_))
        ));
        assert!(matches!(
            store.delete("planted"),
            Err(StoreError::InvalidId(_))
        ));
        assert!(matches!(
            store.open("planted"),
            Err(StoreError::InvalidId(_))
        ));
        assert!(planted.exists(), "nothing touched the planted file");
    }

    #[test]
    fn fork_list_delete() {
        let (_d, store, header) = setup();
        let mut f = store.create(&header).unwrap();
        let recs = [
            msg(Role::User, "first   question\nwith lines"),
            msg(Role::Assistant, "answer"),
            msg(Role::User, "second"),
        ];
        f.append_batch(&recs).unwrap();
        let at = recs[1].uuid().to_string();
        let forked = store.fork(&header.session_id, Some(&at)).unwrap();
        let l = store.load(&forked).unwrap();
        assert_eq!(l.records, recs[..2].to_vec());
        let origin = l.header.forked_from.unwrap();
        assert_eq!(origin.session_id, header.session_id);
        assert_eq!(origin.message_id.as_deref(), Some(at.as_str()));
        assert!(matches!(
            store.fork(&header.session_id, Some("nope")),
            Err(StoreError::MessageNotFound(_))
        ));

        let list = store.list_workspace("/ws").unwrap();
        assert_eq!(list.len(), 2);
        let orig = list.iter().find(|s| s.id == header.session_id).unwrap();
        assert_eq!(orig.message_count, 3);
        assert_eq!(orig.title.as_deref(), Some("first question with lines"));
        assert_eq!(orig.model, "replay:x");
        let fk = list.iter().find(|s| s.id == forked).unwrap();
        assert_eq!(fk.message_count, 2);
        assert_eq!(fk.forked_from.as_deref(), Some(header.session_id.as_str()));
        assert!(store.list_workspace("/other").unwrap().is_empty());

        store.write_tool_result(&forked, "toolu/1", "big").unwrap();
        store.delete(&forked).unwrap();
        assert!(!store.tool_results_dir(&forked).exists());
        assert!(matches!(store.load(&forked), Err(StoreError::NotFound(_))));
        assert!(matches!(
            store.delete(&forked),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.load("../etc"),
            Err(StoreError::InvalidId(_))
        ));
    }

    #[test]
    fn torn_installation_is_marked_aborted_on_resume() {
        let (_d, store, header) = setup();
        let mut f = store.create(&header).unwrap();
        f.append(&msg(Role::User, "a")).unwrap();
        let boundary = Record::CompactBoundary(CompactBoundaryRecord {
            uuid: new_id(),
            time: 1,
            trigger: CompactTrigger::Auto,
            tokens_before: 10,
            tokens_after: 5,
            kept_head_id: None,
            kept_tail_id: None,
            kept_anchor_id: None,
            extractive: false,
            install_count: 3,
            summarizer: None,
            summary_usage: None,
        });
        f.append_batch(&[boundary.clone(), msg(Role::User, "summary")])
            .unwrap();
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.incomplete_install.as_deref(), Some(boundary.uuid()));
        // Even before the marker, the view ignores the torn installation.
        let v = crate::session::view::build_view(&l.records, &store.view_policy("x"), 0);
        assert_eq!(v.messages.len(), 1);
        assert_eq!(v.messages[0].message.text(), "a");
        let (mut f, l) = store.resume(&header.session_id).unwrap();
        assert!(matches!(l.records.last(), Some(Record::InstallAborted(_))));
        f.append(&msg(Role::Assistant, "b")).unwrap();
        let l = store.load(&header.session_id).unwrap();
        assert_eq!(l.incomplete_install, None);
        let v = crate::session::view::build_view(&l.records, &store.view_policy("x"), 0);
        let texts: Vec<String> = v.messages.iter().map(|m| m.message.text()).collect();
        assert_eq!(texts, vec!["a", "b"]);
    }

    use proptest::prelude::*;

    proptest! {
            #![proptest_config(crate::fuzz::config(64))]

            /// Fuzz target: one byte of a transcript overwritten anywhere (any value) never makes
            /// the load fail, and every message whose line (and the newline before it) is
            /// untouched comes back as written.
            #[test]
            fn fuzz_transcript_loader(n in 1usize..6, at in any::<usize>(), byte in any::<u8>()) {
                let (_d, store, header) = setup();
                let recs: Vec<Record> = (0..n)
                    .map(|i| msg(if i % 2 == 0 { Role::User } else { Role::Assistant }, &format!("m{i}")))
                    .collect();
                let mut bytes = transcript(&header, &recs);
                let at = at % bytes.len();
                bytes[at] = byte;
                // Lines by their start offsets: line 0 is the header.
                let mut starts = vec![0usize];
                let mut pos = 0usize;
                for r in std::iter::once(Record::Header(header.clone())).chain(recs.iter().cloned()) {
                    pos += record_line(&r).unwrap().len();
                    starts.push(pos);
                }
                write_raw(&store, &header.session_id, &bytes);
                let l = store.load(&header.session_id);
                prop_assert!(l.is_ok(), "{:?}", l.err());
                let l = l.unwrap();
                let hit = starts.iter().rposition(|&s| s <= at).unwrap_or(0);
                for (i, r) in recs.iter().enumerate() {
                    let line = i + 1;
                    // The hit line is damaged; when its newline was hit, the next line is too.
                    let touched = line == hit || (line == hit + 1 && at + 1 == starts[line]);
                    if !touched {
                        prop_assert!(l.records.contains(r), "line {line} lost (hit line {hit})");
                    }
                }
                let listed = store.list();
                prop_assert!(listed.is_ok());
                prop_assert_eq!(listed.unwrap().len(), 1);
            }
    }

    fn timed(role: Role, text: &str, time: u64) -> Record {
        let mut m = MessageRecord::new(role, vec![Block::text(text)], None);
        m.time = time;
        Record::Message(m)
    }

    #[test]
    fn listing_shows_origin_last_activity_and_the_users_words() {
        let (_d, store, _) = setup();
        // An old transcript: no origin in its header.
        let old = SessionHeader::new("/ws", "replay:x");
        let mut line = serde_json::to_value(Record::Header(old.clone())).unwrap();
        line.as_object_mut().unwrap().remove("origin");
        let mut text = line.to_string();
        text.push('\n');
        fs::create_dir_all(store.base()).unwrap();
        fs::write(store.path_of(&old.session_id), text).unwrap();
        let mut f = store.open(&old.session_id).unwrap();
        f.append(&timed(Role::User, "old question", old.time + 50_000))
            .unwrap();

        let mut exec = SessionHeader::new("/ws", "replay:x");
        exec.origin = SessionOrigin::Exec;
        exec.time = old.time + 1;
        let mut f = store.create(&exec).unwrap();
        let mut first = MessageRecord::new(
            Role::User,
            vec![
                Block::text("<garuda_note>instructions changed</garuda_note>"),
                Block::text("<context path=\"a.rs\" lines=\"1-2\">\n```\nx\n```\n</context>"),
                Block::text("<garuda_note>x</garuda_note>\n\n  explain   this"),
            ],
            None,
        );
        first.time = exec.time + 10;
        f.append(&Record::Message(first)).unwrap();

        let list = store.list_workspace("/ws").unwrap();
        assert_eq!(list.len(), 2);
        // The old session was active last, so it comes first though created first.
        assert_eq!(list[0].id, old.session_id);
        assert_eq!(list[0].origin, SessionOrigin::Serve);
        assert_eq!(list[0].updated, old.time + 50_000);
        assert_eq!(list[0].title.as_deref(), Some("old question"));
        assert_eq!(list[1].origin, SessionOrigin::Exec);
        assert_eq!(list[1].updated, exec.time + 10);
        assert_eq!(list[1].title.as_deref(), Some("explain this"));
        assert_eq!(
            store.load(&exec.session_id).unwrap().header.origin,
            SessionOrigin::Exec
        );
    }

    #[test]
    fn injected_blocks_are_stripped_from_titles() {
        assert_eq!(strip_injected("plain"), "plain");
        assert_eq!(strip_injected("<garuda_note>a</garuda_note> b"), "b");
        assert_eq!(strip_injected("<context path=\"x\">c</context>"), "");
        assert_eq!(strip_injected("<garuda_note>never closed"), "");
        // The user's own markup stays.
        assert_eq!(strip_injected("<div>hi</div> why?"), "<div>hi</div> why?");
        assert_eq!(strip_injected("<contextual> words"), "<contextual> words");
    }

    #[test]
    fn a_title_is_the_users_words_not_an_attached_block() {
        let t = |blocks: &[&str]| {
            let blocks: Vec<Block> = blocks.iter().map(|b| Block::text(*b)).collect();
            title_of_blocks(&blocks)
        };
        // An ACP client's shared rule file comes first; the words after it name the session.
        assert_eq!(
            t(&[
                "Sharing AGENTS.md:\n---\n# proj1\nBe brief.",
                "fix the parser"
            ])
            .as_deref(),
            Some("fix the parser")
        );
        assert_eq!(
            t(&["[resource: a.rs <file:///p/a.rs>]", "explain a.rs"]).as_deref(),
            Some("explain a.rs")
        );
        assert_eq!(
            t(&[
                "<context uri=\"file:///p/a.rs\">\nfn a() {}\n</context>",
                "why?"
            ])
            .as_deref(),
            Some("why?")
        );
        // One block is the user's own, colon or not; only attachments: the first names it.
        assert_eq!(
            t(&["Fix this:\nlet x = 1;"]).as_deref(),
            Some("Fix this: let x = 1;")
        );
        assert_eq!(
            t(&["Sharing a.md:\nA", "Sharing b.md:\nB"]).as_deref(),
            Some("Sharing a.md: A")
        );
        assert_eq!(
            t(&["first words", "Sharing b.md:\nB"]).as_deref(),
            Some("first words")
        );
        assert_eq!(t(&["  "]), None);
    }
}
