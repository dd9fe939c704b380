//! Asking the person, shared by a tool call's approval and a plan's approval: the turn and
//! plan mode both ask through here, so neither imports the other.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::events::{PermissionAnswer, PermissionRequest};
use super::host::TurnHost;
use super::live::LiveSession;
use crate::hooks::EventData;
use crate::tools::{ToolMeta, ToolOutput};

pub(super) const INTERRUPTED: &str =
    "[interrupted: the turn was cancelled before this tool call finished]";

/// Asks the person through the host: the Notification hooks hear `notice` first, and the
/// answer is waited for within the approval timeout (the host enforces it and tells its
/// client; this is a backstop for hosts that never answer). None: the turn was cancelled
/// meanwhile.
pub(super) async fn ask_person(
    session: &Arc<LiveSession>,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    req: PermissionRequest,
    notice: String,
) -> Option<PermissionAnswer> {
    super::hooks::fire_and_forget(
        session,
        EventData::Notification {
            message: notice,
            notification_type: "permission_prompt".into(),
        },
    );
    let secs = session.setup.approval_timeout_secs.max(1);
    let wait = Duration::from_secs(secs + 2);
    tokio::select! {
        a = tokio::time::timeout(wait, host.ask_permission(req)) => Some(a.unwrap_or(PermissionAnswer::TimedOut)),
        _ = cancel.cancelled() => None,
    }
}

/// The result of a tool call the turn's cancel cut short.
pub(super) fn interrupted() -> ToolOutput {
    ToolOutput::error(INTERRUPTED).with_meta(ToolMeta {
        cancelled: true,
        ..Default::default()
    })
}
