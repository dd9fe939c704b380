//! Nested instruction files and path-scoped rules in a live session: the paths its tools
//! touched, what is in force for them, what the model has of it, and the notes that close
//! the gap (once per file and version). The system prompt never changes for them.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use super::live::{LiveSession, SessionState, TurnError};
pub use super::notes::{Attached, ScopeState};
use super::view::current_view;
use crate::fsroot::{EntryKind, Root};
use crate::message::{Block, Role};
use crate::prompt::nested::{self, InForce, NoteEntry, Scoped, Touched};
use crate::prompt::sources::RuleMatcher;
use crate::prompt::{SourceKind, SourceReport};
use crate::session::compact::Reattach;
use crate::session::records::{
    InstructionChangeRecord, MessageMeta, MessageRecord, Record, new_id, now_ms,
};
use crate::tools::{ToolRegistry, Touched as Place};
use crate::workspace::Workspace;

impl ScopeState {
    /// The state of a transcript: every path its tool calls touched, and the sources its
    /// scoped `instruction_change` records put in the model's view since the last compaction.
    pub fn replay(records: &[Record], tools: &ToolRegistry, root: &Root) -> ScopeState {
        let mut s = ScopeState {
            dirty: true,
            check_view: true,
            ..ScopeState::default()
        };
        for r in records {
            match r {
                Record::Message(m) => {
                    for b in &m.content {
                        if let Block::ToolUse { name, input, .. } = b
                            && let Some(place) = tools.get(name).and_then(|e| e.touched(input))
                        {
                            s.touch(root, place);
                        }
                    }
                }
                Record::CompactBoundary(_) => s.attached.clear(),
                Record::InstructionChange(c) if c.scoped => s.apply(c),
                _ => {}
            }
        }
        s
    }

    fn apply(&mut self, c: &InstructionChangeRecord) {
        let id = c.message_id.clone().unwrap_or_default();
        for (p, v) in c.paths.iter().zip(&c.sha256) {
            if v.is_empty() {
                self.attached.remove(p);
            } else {
                self.attached.insert(
                    p.clone(),
                    Attached {
                        version: v.clone(),
                        message_id: id.clone(),
                    },
                );
            }
        }
    }

    /// Records that a tool worked at `place`; paths leading out of the root are ignored.
    pub fn touch(&mut self, root: &Root, place: Place<'_>) {
        let (given, dir) = match place {
            Place::File(p) => (p, Some(false)),
            Place::Folder(p) => (p, Some(true)),
            Place::Either(p) => (p, None),
        };
        let Ok(rel) = root.relative(Path::new(given)) else {
            return;
        };
        let is_dir = dir.unwrap_or_else(|| matches!(root.kind(&rel), Ok(Some(EntryKind::Dir))));
        let rel = rel.to_string_lossy().replace('\\', "/");
        let (file, folder) = if rel == "." {
            (None, None)
        } else if is_dir {
            (None, Some(rel))
        } else {
            let parent = rel.rsplit_once('/').map(|(d, _)| d.to_string());
            (Some(rel), parent)
        };
        let mut new = false;
        if let Some(f) = &file {
            new |= self.touched.files.insert(f.clone());
        }
        if let Some(d) = &folder {
            new |= self.touched.dirs.insert(d.clone());
        }
        // Working again where an evicted source governs brings it back.
        let before = self.evicted.len();
        if !self.evicted.is_empty() {
            let in_force = &self.in_force.scoped;
            self.evicted.retain(|p| {
                let Some(s) = in_force.iter().find(|s| &s.path == p) else {
                    return false;
                };
                !governs(s, file.as_deref(), folder.as_deref())
            });
        }
        if new || self.evicted.len() != before {
            self.dirty = true;
        }
    }

    /// Forgets sources whose note left the view (snip, collapse); they are sent again.
    pub fn keep_in_view(&mut self, ids: &HashSet<&str>) {
        let before = self.attached.len();
        self.attached
            .retain(|_, a| ids.contains(a.message_id.as_str()));
        if self.attached.len() != before {
            self.dirty = true;
        }
        self.check_view = false;
    }

    /// The next note must look at the view first (after a snip or a collapse).
    pub fn view_changed(&mut self) {
        self.check_view = true;
        self.dirty = true;
    }

    /// Reports of the sources in force (and of those found but not used), for inspection.
    pub fn reports(&self) -> Vec<SourceReport> {
        let mut out: Vec<SourceReport> = self
            .in_force
            .scoped
            .iter()
            .map(|s| s.report(self.attached.contains_key(&s.path)))
            .collect();
        out.extend(self.in_force.skipped.iter().cloned());
        out
    }
}

/// The nested files and rules of a session for inspection: in force (whether the model has
/// them now), and those found but not used. Computed when not known yet (after a load).
pub fn scoped_sources(session: &LiveSession, scope: &mut ScopeState) -> Vec<SourceReport> {
    let ws = &session.setup.workspace;
    if ws.config.instructions.scoped() && scope.generation != Some(ws.generation()) {
        scope.in_force = compute(ws, &scope.touched);
        scope.generation = Some(ws.generation());
        // The next note still compares with what the model has.
        scope.dirty = true;
    }
    scope.reports()
}

/// True when `s` governs the touched file or folder.
fn governs(s: &Scoped, file: Option<&str>, folder: Option<&str>) -> bool {
    match s.kind {
        SourceKind::Nested => {
            let dir = s.scope.trim_end_matches('/');
            let under = |p: &str| p == dir || p.starts_with(&s.scope);
            file.is_some_and(under) || folder.is_some_and(under)
        }
        _ => {
            let globs: Vec<String> = s.scope.split(", ").map(str::to_string).collect();
            let (m, _) = RuleMatcher::new(&globs);
            file.is_some_and(|f| m.file(f)) || folder.is_some_and(|d| m.folder(d))
        }
    }
}

/// What is in force for `touched` in `ws` now (files read through the root, from cache when
/// unchanged); the folders on the way are watched from now on.
fn compute(ws: &Workspace, touched: &Touched) -> InForce {
    let settings = &ws.config.instructions;
    let mut dir_files = BTreeMap::new();
    if settings.has(crate::prompt::Source::Nested) {
        let chain = nested::chain_dirs(touched);
        for d in &chain {
            let files = ws.nested(d);
            if !files.is_empty() {
                dir_files.insert(d.clone(), files);
            }
        }
        ws.watch_dirs(&chain);
    }
    let g = ws.gathered(&ws.config.limits);
    nested::in_force(
        touched,
        &dir_files,
        &g.rules,
        &g.instructions,
        settings.nested_chars,
    )
}

/// Drops attachments whose note left the view, when a snip, collapse or load may have done so.
fn check_view(session: &LiveSession, state: &mut SessionState) -> Result<(), TurnError> {
    if !state.scope.check_view {
        return Ok(());
    }
    let view = current_view(state, &session.setup.view_policy)?;
    let ids: HashSet<String> = view
        .messages
        .iter()
        .flat_map(|m| m.source_ids.iter().cloned())
        .collect();
    let ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
    state.scope.keep_in_view(&ids);
    Ok(())
}

/// A scoped note's records, and the files it brought into force (root-relative path and
/// the InstructionsLoaded reason: `nested_traversal` for a nested file, `path_glob_match`
/// for a rule, as Claude Code names them).
#[derive(Default)]
pub(crate) struct ScopedNote {
    pub records: Vec<Record>,
    pub loaded: Vec<(String, &'static str)>,
}

/// The note (and its record) for nested files and rules newly in force, changed on disk or
/// no longer in force since the model last heard; empty when nothing changed. Cheap when
/// nothing was touched and no file changed since the last call.
pub(crate) fn scoped_note(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<ScopedNote, TurnError> {
    let ws = &session.setup.workspace;
    if !ws.config.instructions.scoped() {
        return Ok(ScopedNote::default());
    }
    let generation = ws.generation();
    if !state.scope.dirty && state.scope.generation == Some(generation) {
        return Ok(ScopedNote::default());
    }
    check_view(session, state)?;
    let in_force = compute(ws, &state.scope.touched);
    let scope = &mut state.scope;
    scope.generation = Some(generation);
    scope.dirty = false;
    let mut entries = Vec::new();
    for s in &in_force.scoped {
        if scope.evicted.contains(&s.path) {
            continue;
        }
        match scope.attached.get(&s.path) {
            None => entries.push(NoteEntry::Added(s)),
            Some(a) if a.version != s.version => entries.push(NoteEntry::Changed(s)),
            Some(_) => {}
        }
    }
    let gone: Vec<String> = scope
        .attached
        .keys()
        .filter(|p| !in_force.scoped.iter().any(|s| &s.path == *p))
        .cloned()
        .collect();
    entries.extend(gone.iter().map(|p| NoteEntry::Removed(p)));
    if entries.is_empty() {
        scope.in_force = in_force;
        return Ok(ScopedNote::default());
    }
    let text = nested::note(&entries);
    let mut message =
        MessageRecord::new(Role::User, vec![Block::text(text)], state.last_message_id());
    message.meta = Some(MessageMeta::InstructionNote);
    let mut paths = Vec::new();
    let mut versions = Vec::new();
    let mut loaded = Vec::new();
    for e in &entries {
        match e {
            NoteEntry::Added(s) | NoteEntry::Changed(s) => {
                paths.push(s.path.clone());
                versions.push(s.version.clone());
                let reason = match s.kind {
                    crate::prompt::SourceKind::Rule => "path_glob_match",
                    _ => "nested_traversal",
                };
                loaded.push((s.path.clone(), reason));
            }
            NoteEntry::Removed(p) => {
                paths.push(p.to_string());
                versions.push(String::new());
            }
        }
    }
    let record = InstructionChangeRecord {
        uuid: new_id(),
        time: now_ms(),
        paths,
        sha256: versions,
        scoped: true,
        message_id: Some(message.uuid.clone()),
    };
    let scope = &mut state.scope;
    scope.apply(&record);
    scope.in_force = in_force;
    Ok(ScopedNote {
        records: vec![Record::InstructionChange(record), Record::Message(message)],
        loaded,
    })
}

/// A re-attachment and what the session knows once it is installed.
pub(crate) struct Reattachment {
    /// What the installation carries.
    pub plan: Reattach,
    left_out: Vec<String>,
    in_force: InForce,
    generation: u64,
}

/// What a compaction re-attaches: every nested file and rule in force, re-read from disk
/// (the caller invalidated the workspace), the most recently attached first within
/// `room_chars` (and `nested_total_chars`); the rest is named with its size and comes back
/// when touched again.
pub(crate) fn reattach(
    session: &LiveSession,
    state: &SessionState,
    room_chars: usize,
) -> Option<Reattachment> {
    let ws = &session.setup.workspace;
    let settings = &ws.config.instructions;
    if !settings.scoped() || state.scope.touched == Touched::default() {
        return None;
    }
    let in_force = compute(ws, &state.scope.touched);
    if in_force.scoped.is_empty() {
        return None;
    }
    let budget = settings.nested_total_chars.min(room_chars);
    // Most recently attached first (message ids are time-ordered), then the others.
    let mut order: Vec<&Scoped> = in_force.scoped.iter().collect();
    order.sort_by(|a, b| {
        let id = |s: &Scoped| {
            state
                .scope
                .attached
                .get(&s.path)
                .map(|a| a.message_id.clone())
        };
        id(b).cmp(&id(a))
    });
    let mut used = 0usize;
    let mut keep: HashSet<&str> = HashSet::new();
    for s in order {
        let c = s.chars() + 2;
        if used + c <= budget {
            used += c;
            keep.insert(s.path.as_str());
        }
    }
    let kept: Vec<&Scoped> = in_force
        .scoped
        .iter()
        .filter(|s| keep.contains(s.path.as_str()))
        .collect();
    let left_out: Vec<&Scoped> = in_force
        .scoped
        .iter()
        .filter(|s| !keep.contains(s.path.as_str()))
        .collect();
    let plan = Reattach {
        text: nested::reattach_note(&kept, &left_out),
        sources: kept
            .iter()
            .map(|s| (s.path.clone(), s.version.clone()))
            .collect(),
    };
    let left_out = left_out.iter().map(|s| s.path.clone()).collect();
    Some(Reattachment {
        plan,
        left_out,
        in_force,
        generation: ws.generation(),
    })
}

/// After an installation: the model has exactly what it re-attached.
pub(crate) fn installed(
    state: &mut SessionState,
    reattach: Option<Reattachment>,
    message_id: Option<&str>,
) {
    let scope = &mut state.scope;
    scope.attached.clear();
    scope.evicted.clear();
    scope.check_view = false;
    let Some(r) = reattach else {
        scope.dirty = true;
        return;
    };
    let id = message_id.unwrap_or_default().to_string();
    for (p, v) in r.plan.sources {
        scope.attached.insert(
            p,
            Attached {
                version: v,
                message_id: id.clone(),
            },
        );
    }
    scope.evicted.extend(r.left_out);
    scope.in_force = r.in_force;
    scope.generation = Some(r.generation);
    scope.dirty = false;
}
