//! The ACP method table: every method the ACP front answers, declared once with its name
//! (the schema crate's own constant), its params and result (the schema crate's types),
//! where it runs and in which lane; and the methods Garuda calls on the client, typed the same
//! way.
//!
//! The table generates one marker type per method and one request enum per schedule; the
//! front handles each schedule in a function of its own with an exhaustive `match`, so a
//! method added here does not compile until it is handled.

use agent_client_protocol_schema::v1::{
    self as acp, AGENT_METHOD_NAMES, CLIENT_METHOD_NAMES, PROTOCOL_LEVEL_METHOD_NAMES,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::front::parse_params;
use crate::rpc::RpcError;

/// Where an ACP request runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// On the read loop, from memory only: answered in order, never waits.
    Inline,
    /// On the blocking pool: it reads or writes files or waits for MCP servers; the read loop
    /// goes on meanwhile.
    Blocking,
    /// As a task of its own: a turn (model calls, approvals), cancellable.
    Spawned,
}

/// Which of the transport's running limits a request off the read loop counts against: long
/// work has a lane of its own, so it never holds a slot quick work needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// None: the request never leaves the read loop (the inline rows).
    Loop,
    /// Quick work (files) under `max_in_flight`.
    Quick,
    /// Long work under `max_long_in_flight`: a turn, or a session that starts, since it may
    /// start MCP servers (the client's `mcpServers` as well as the config's).
    Long,
}

/// One request of the table.
pub trait AcpMethod {
    /// The wire name.
    const NAME: &'static str;
    /// Where it runs.
    const SCHEDULE: Schedule;
    /// Its lane off the read loop.
    const LANE: Lane;
    /// Its params.
    type Params: DeserializeOwned + Send + 'static;
    /// Its result.
    type Result: Serialize + Send + 'static;
}

/// One notification the client sends; all run on the read loop (they only flip tokens).
pub trait AcpNotification {
    /// The wire name.
    const NAME: &'static str;
    /// Its params.
    type Params: DeserializeOwned;
}

/// `initialize` params with a `protocolVersion` the schema's `ProtocolVersion` cannot read (a
/// string such as `"1"`, a fraction, a number above `u16`) set to the latest version Garuda
/// speaks: the spec lets the agent answer its own latest and the client decide, so such a
/// client gets an answer instead of -32602.
pub fn tolerant_version(mut params: Value) -> Value {
    if let Some(v) = params.get_mut("protocolVersion")
        && serde_json::from_value::<agent_client_protocol_schema::ProtocolVersion>(v.clone())
            .is_err()
    {
        *v = serde_json::json!(agent_client_protocol_schema::ProtocolVersion::LATEST);
    }
    params
}

/// Garuda's config options are selects: a `session/set_config_option` whose `value` is not a
/// string is refused in words a person reads, before the schema's untagged enum would answer
/// with its own type name.
pub fn check_config_value(method: &str, params: &Value) -> Result<(), RpcError> {
    if method != SetConfigOption::NAME {
        return Ok(());
    }
    match params.get("value") {
        Some(v) if !v.is_string() => Err(RpcError::invalid_params(format!(
            "session/set_config_option: `value` must be a string naming one of the option's \
             choices (Garuda's options, `model` and `mode`, are selects), not {v}"
        ))),
        _ => Ok(()),
    }
}

/// A method's result as the wire value, typed by the table.
pub fn ok<M: AcpMethod>(r: M::Result) -> Result<Value, RpcError> {
    serde_json::to_value(r).map_err(|e| RpcError::internal(e.to_string()))
}

macro_rules! acp_methods {
    (
        requests { $( $(#[doc = $doc:literal])* $ty:ident = $name:expr, $sched:ident, $lane:ident, $p:ty => $r:ty; )* }
        notifications { $( $(#[doc = $ndoc:literal])* $nty:ident = $nname:expr, $np:ty; )* }
    ) => {
        $(
            $(#[doc = $doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl AcpMethod for $ty {
                const NAME: &'static str = $name;
                const SCHEDULE: Schedule = Schedule::$sched;
                const LANE: Lane = Lane::$lane;
                type Params = $p;
                type Result = $r;
            }
        )*
        $(
            $(#[doc = $ndoc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $nty;
            impl AcpNotification for $nty {
                const NAME: &'static str = $nname;
                type Params = $np;
            }
        )*

        /// The names of the requests the ACP front answers, in table order.
        pub const METHODS: &[&str] = &[$($name),*];

        acp_methods!(@split [] [] [] $($ty $sched,)*);

        /// Every row's name, schedule and lane, for the test that they fit.
        #[cfg(test)]
        fn rows() -> Vec<(&'static str, Schedule, Lane)> {
            vec![$(($name, Schedule::$sched, Lane::$lane)),*]
        }

        /// A notification of the table with its params decoded.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum AcpNotice { $($nty(<$nty as AcpNotification>::Params)),* }

        impl AcpNotice {
            /// The table's notification names.
            pub fn names() -> Vec<&'static str> {
                vec![$(<$nty as AcpNotification>::NAME),*]
            }

            /// Decodes a notification; `Ok(None)` for one not in the table.
            pub fn parse(method: &str, params: Value) -> Result<Option<AcpNotice>, RpcError> {
                $(if method == <$nty as AcpNotification>::NAME {
                    return Ok(Some(AcpNotice::$nty(parse_params(params)?)));
                })*
                Ok(None)
            }
        }
    };
    // Reads each request's lane from its row, so the front keeps no list of its own.
    (@lane $enum:ident $($v:ident)*) => {
        impl $enum {
            /// Its row's lane.
            pub fn lane(&self) -> Lane {
                match *self {
                    $($enum::$v(_) => <$v as AcpMethod>::LANE,)*
                }
            }
        }
    };
    (@split [$($i:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Inline, $($rest:tt)*) => {
        acp_methods!(@split [$($i)* $ty] [$($b)*] [$($s)*] $($rest)*);
    };
    (@split [$($i:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Blocking, $($rest:tt)*) => {
        acp_methods!(@split [$($i)*] [$($b)* $ty] [$($s)*] $($rest)*);
    };
    (@split [$($i:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Spawned, $($rest:tt)*) => {
        acp_methods!(@split [$($i)*] [$($b)*] [$($s)* $ty] $($rest)*);
    };
    (@split [$($i:ident)*] [$($b:ident)*] [$($s:ident)*]) => {
        /// A parsed request that runs on the read loop.
        #[derive(Debug)]
        // `initialize`'s params are large; a request is decoded once and moved, not stored.
        #[allow(missing_docs, clippy::large_enum_variant)]
        pub enum InlineRequest { $($i(<$i as AcpMethod>::Params)),* }
        /// A parsed request that runs on the blocking pool.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum BlockingRequest { $($b(<$b as AcpMethod>::Params)),* }
        /// A parsed request that runs as a task of its own.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum SpawnedRequest { $($s(<$s as AcpMethod>::Params)),* }

        acp_methods!(@lane InlineRequest $($i)*);
        acp_methods!(@lane BlockingRequest $($b)*);
        acp_methods!(@lane SpawnedRequest $($s)*);

        /// A request of the table with its params decoded, by schedule.
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant)]
        pub enum AcpRequest {
            /// Runs on the read loop.
            Inline(InlineRequest),
            /// On the blocking pool.
            Blocking(BlockingRequest),
            /// As a task.
            Spawned(SpawnedRequest),
        }

        impl AcpRequest {
            /// Decodes a request; `Ok(None)` for a method not in the table.
            pub fn parse(method: &str, params: Value) -> Result<Option<AcpRequest>, RpcError> {
                $(if method == <$i as AcpMethod>::NAME {
                    return Ok(Some(AcpRequest::Inline(InlineRequest::$i(parse_params(params)?))));
                })*
                $(if method == <$b as AcpMethod>::NAME {
                    return Ok(Some(AcpRequest::Blocking(BlockingRequest::$b(parse_params(params)?))));
                })*
                $(if method == <$s as AcpMethod>::NAME {
                    return Ok(Some(AcpRequest::Spawned(SpawnedRequest::$s(parse_params(params)?))));
                })*
                Ok(None)
            }
        }
    };
}

acp_methods! {
    requests {
        /// Remembers the client's capabilities, answers Garuda's.
        Initialize = AGENT_METHOD_NAMES.initialize, Inline, Loop, acp::InitializeRequest => acp::InitializeResponse;
        /// No auth methods are offered, so every method id is refused.
        Authenticate = AGENT_METHOD_NAMES.authenticate, Inline, Loop, acp::AuthenticateRequest => acp::AuthenticateResponse;
        /// Nothing to forget: keys come from the environment or the config file, never from
        /// the client, so it answers success and changes nothing.
        Logout = AGENT_METHOD_NAMES.logout, Inline, Loop, acp::LogoutRequest => acp::LogoutResponse;
        /// Opens `cwd` as a workspace and starts a session (MCP servers included).
        NewSession = AGENT_METHOD_NAMES.session_new, Blocking, Long, acp::NewSessionRequest => acp::NewSessionResponse;
        /// Loads a stored session and replays its history.
        LoadSession = AGENT_METHOD_NAMES.session_load, Blocking, Long, acp::LoadSessionRequest => acp::LoadSessionResponse;
        /// A session without a replay.
        ResumeSession = AGENT_METHOD_NAMES.session_resume, Blocking, Long, acp::ResumeSessionRequest => acp::ResumeSessionResponse;
        /// A new session with a stored session's history; the source stays as it was
        /// (unstable in ACP: the schema crate's `unstable_session_fork` types).
        ForkSession = AGENT_METHOD_NAMES.session_fork, Blocking, Long, acp::ForkSessionRequest => acp::ForkSessionResponse;
        /// The stored sessions, newest first.
        ListSessions = AGENT_METHOD_NAMES.session_list, Blocking, Quick, acp::ListSessionsRequest => acp::ListSessionsResponse;
        /// Closes a live session and removes its transcript and side files (no trash).
        DeleteSession = AGENT_METHOD_NAMES.session_delete, Blocking, Quick, acp::DeleteSessionRequest => acp::DeleteSessionResponse;
        /// Cancels a session's work and frees it from memory.
        CloseSession = AGENT_METHOD_NAMES.session_close, Inline, Loop, acp::CloseSessionRequest => acp::CloseSessionResponse;
        /// Runs one turn.
        Prompt = AGENT_METHOD_NAMES.session_prompt, Spawned, Long, acp::PromptRequest => acp::PromptResponse;
        /// Sets the approval policy.
        SetMode = AGENT_METHOD_NAMES.session_set_mode, Inline, Loop, acp::SetSessionModeRequest => acp::SetSessionModeResponse;
        /// Sets `model` or `mode`.
        SetConfigOption = AGENT_METHOD_NAMES.session_set_config_option, Blocking, Quick, acp::SetSessionConfigOptionRequest => acp::SetSessionConfigOptionResponse;
    }
    notifications {
        /// Cancels a session's running turn.
        Cancel = AGENT_METHOD_NAMES.session_cancel, acp::CancelNotification;
        /// Cancels one request in flight.
        CancelRequest = PROTOCOL_LEVEL_METHOD_NAMES.cancel_request, acp::CancelRequestNotification;
    }
}

/// A method Garuda calls on the client.
pub trait ClientMethod {
    /// The wire name.
    const NAME: &'static str;
    /// Its params.
    type Params: Serialize;
    /// Its result.
    type Result: DeserializeOwned;
}

macro_rules! client_methods {
    ($( $(#[doc = $doc:literal])* $ty:ident = $name:expr, $p:ty => $r:ty; )*) => {$(
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;
        impl ClientMethod for $ty {
            const NAME: &'static str = $name;
            type Params = $p;
            type Result = $r;
        }
    )*};
}

client_methods! {
    /// A notification (no result): what a session does.
    SessionUpdate = CLIENT_METHOD_NAMES.session_update, acp::SessionNotification => ();
    /// Asks the user to approve a tool call.
    RequestPermission = CLIENT_METHOD_NAMES.session_request_permission, acp::RequestPermissionRequest => acp::RequestPermissionResponse;
    /// Writes a file through the editor.
    WriteTextFile = CLIENT_METHOD_NAMES.fs_write_text_file, acp::WriteTextFileRequest => acp::WriteTextFileResponse;
    /// Reads a file through the editor (unsaved buffers included).
    ReadTextFile = CLIENT_METHOD_NAMES.fs_read_text_file, acp::ReadTextFileRequest => acp::ReadTextFileResponse;
    /// Starts a command in the editor's terminal.
    CreateTerminal = CLIENT_METHOD_NAMES.terminal_create, acp::CreateTerminalRequest => acp::CreateTerminalResponse;
    /// A terminal's output so far.
    TerminalOutput = CLIENT_METHOD_NAMES.terminal_output, acp::TerminalOutputRequest => acp::TerminalOutputResponse;
    /// Frees a terminal.
    ReleaseTerminal = CLIENT_METHOD_NAMES.terminal_release, acp::ReleaseTerminalRequest => acp::ReleaseTerminalResponse;
    /// Waits for a terminal's command to exit.
    WaitForTerminalExit = CLIENT_METHOD_NAMES.terminal_wait_for_exit, acp::WaitForTerminalExitRequest => acp::WaitForTerminalExitResponse;
    /// Asks the person for what an MCP server requested during a tool call.
    CreateElicitation = CLIENT_METHOD_NAMES.elicitation_create, acp::CreateElicitationRequest => acp::CreateElicitationResponse;
    /// Kills a terminal's command.
    KillTerminal = CLIENT_METHOD_NAMES.terminal_kill, acp::KillTerminalRequest => acp::KillTerminalResponse;
}

/// What the client is told when Garuda gives up on a request it sent.
pub const CANCEL_REQUEST: &str = PROTOCOL_LEVEL_METHOD_NAMES.cancel_request;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_fit_schedules() {
        for (name, schedule, lane) in rows() {
            let fits = match schedule {
                Schedule::Inline => lane == Lane::Loop,
                Schedule::Blocking => matches!(lane, Lane::Quick | Lane::Long),
                Schedule::Spawned => lane == Lane::Long,
            };
            assert!(fits, "{name}: {lane:?} does not fit {schedule:?}");
        }
    }
}
