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
    /// The id is not a plain file name.
    #[error("invalid session id: {0}")]
    InvalidId(String),
    /// The first line is not a session header.
    #[error("transcript {0} has no session header")]
    NoHeader(String),
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
    /// The front that created it.
    pub origin: SessionOrigin,
    /// Time of the last record, unix ms (the creation time when nothing followed the header).
    pub updated: u64,
}

const TITLE_CHARS: usize = 80;

fn check_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidId(id.to_string()))
    }
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
        let mut loaded = self.load(id)?;
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
            match parse_line(trimmed) {
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
        let header = header.ok_or_else(|| StoreError::NoHeader(id.to_string()))?;
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
        })
    }

    /// Summaries of every session in the store, newest first. Reads only the header, the
    /// first user message and counts message lines without parsing them.
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
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err(&self.base))?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            match summarize(&path) {
                Ok(Some(s)) => out.push(s),
                Ok(None) => tracing::warn!(path = %path.display(), "transcript without header"),
                Err(e) => tracing::warn!("{e}"),
            }
        }
        sort_newest_first(&mut out);
        Ok(out)
    }

    /// Sessions of one workspace root (the header's `workspaceRoot`).
    pub fn list_workspace(&self, root: &str) -> Result<Vec<SessionSummary>, StoreError> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|s| s.workspace_root == root)
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

fn summarize(path: &Path) -> Result<Option<SessionSummary>, StoreError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::new();
    // The last complete line after the header; its time is the session's last activity.
    let mut last = Vec::new();
    let mut header: Option<SessionHeader> = None;
    let mut count = 0usize;
    let mut title = None;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            break; // torn tail
        }
        if header.is_none() {
            if let ParsedLine::Record(r) = parse_line(&String::from_utf8_lossy(&buf))
                && let Record::Header(h) = *r
            {
                header = Some(h);
                continue;
            }
            return Ok(None);
        }
        // The tag is serialized first, so a prefix test counts messages without parsing.
        if buf.starts_with(br#"{"type":"message""#) {
            count += 1;
            if title.is_none()
                && contains(&buf, br#""role":"user""#)
                && let ParsedLine::Record(r) = parse_line(&String::from_utf8_lossy(&buf))
                && let Record::Message(m) = *r
                && m.role == Role::User
                && m.meta.is_none()
                && !m.is_virtual
                && m.copy_of.is_none()
            {
                title = first_words(&m.content).map(|t| excerpt(&t, TITLE_CHARS));
            }
        }
        if !buf.trim_ascii().is_empty() {
            std::mem::swap(&mut buf, &mut last);
        }
    }
    Ok(header.map(|h| SessionSummary {
        updated: record_time(&last).unwrap_or(h.time).max(h.time),
        id: h.session_id,
        created: h.time,
        model: h.model,
        workspace_root: h.workspace_root,
        message_count: count,
        title,
        forked_from: h.forked_from.map(|f| f.session_id),
        origin: h.origin,
    }))
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

/// The user's own first words in a message: its first text that is not an injected block.
fn first_words(blocks: &[Block]) -> Option<String> {
    blocks.iter().find_map(|b| match b {
        Block::Text { text } => {
            let words = strip_injected(text);
            (!words.trim().is_empty()).then(|| words.to_string())
        }
        _ => None,
    })
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
            extractive: false,
            install_count: 3,
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
}
