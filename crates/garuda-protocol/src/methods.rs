//! The method table: every request the native front answers, declared once with its params,
//! its result, where it runs and in which lane; the notifications the client sends; and the
//! methods the server calls or notifies on the client.
//! Dispatch (by schedule and lane), the schema, the `initialize` method list and the
//! documentation's list all come from here.

use schemars::{JsonSchema, SchemaGenerator};
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;

/// Where a request runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// On the read loop, from in-memory state only: answered in order, never waits on disk.
    Inline,
    /// On the read loop when the answer is in memory, else on the blocking pool.
    Cached,
    /// On the blocking pool: it may read or write files, and other requests go on meanwhile.
    Blocking,
    /// As a task of its own: long work (model calls, approvals), cancellable.
    Spawned,
}

/// Which of the transport's running limits a request off the read loop counts against: long
/// work has a lane of its own, so it never holds a slot quick work needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// None: the request never leaves the read loop (the inline rows).
    Loop,
    /// Quick work (files, a cache miss) under `max_in_flight`.
    Quick,
    /// Long work (model calls, approvals) under `max_long_in_flight`.
    Long,
    /// None: it runs off the read loop, but the loop reads on only after it has answered
    /// (LSP `initialize`: a script may send its next request without waiting).
    Ordered,
    /// Quick, unless it may start the config's MCP servers (seconds, not milliseconds): long
    /// when the config names any and the request makes a session, or names one that is not
    /// live (bringing it back from disk starts its servers; a live one has them already).
    StartsMcp,
}

impl Lane {
    /// How the documentation names it.
    pub fn describe(self) -> &'static str {
        match self {
            Lane::Loop => "none",
            Lane::Quick => "quick",
            Lane::Long => "long",
            Lane::Ordered => "none: answered before the next message is read",
            Lane::StartsMcp => "long if it starts MCP servers, else quick",
        }
    }
}

/// One method of the table.
pub trait Method {
    /// The wire name.
    const NAME: &'static str;
    /// Where it runs.
    const SCHEDULE: Schedule;
    /// Its lane off the read loop.
    const LANE: Lane;
    /// The session whose liveness decides a [`Lane::StartsMcp`] row's lane (`None`: the
    /// request makes a new session, or the lane does not depend on one).
    fn lane_session(params: &Self::Params) -> Option<&str>;
    /// Its params.
    type Params: DeserializeOwned + Send + 'static;
    /// Its result.
    type Result: Serialize + Send + 'static;
    /// Its params are an object of named fields (not `none` or LSP's own).
    const BY_NAME: bool;
}

/// The params of a method that takes none: absent, `null`, `{}`, `[]` or `[null]` (what
/// vscode-jsonrpc sends for a request without params); anything else is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoParams;

impl<'de> Deserialize<'de> for NoParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(NoParams),
            Value::Object(o) if o.is_empty() => Ok(NoParams),
            Value::Array(a) if a.iter().all(Value::is_null) && a.len() <= 1 => Ok(NoParams),
            other => Err(serde::de::Error::custom(format!(
                "this method takes no params, got {other}"
            ))),
        }
    }
}

/// Reads an optional object field strictly: `null` or a JSON object, never an array (serde's
/// derive would otherwise take `[]` or `[..]` as the struct's fields by position).
pub fn object_or_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v @ Value::Object(_) => T::deserialize(v)
            .map(Some)
            .map_err(serde::de::Error::custom),
        other => Err(serde::de::Error::custom(format!(
            "expected an object or null, got {}",
            kind(&other)
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Decodes a method's params; params by name are an object, never an array by position.
fn decode<M: Method>(params: Value) -> Result<M::Params, serde_json::Error> {
    if M::BY_NAME && !params.is_object() {
        return Err(serde::de::Error::custom(format!(
            "params must be an object, got {}",
            kind(&params)
        )));
    }
    serde_json::from_value(params)
}

/// The result of a method that answers `null`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Null(Option<()>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_params_means_none() {
        for ok in ["null", "{}", "[]", "[null]"] {
            let v: Value = serde_json::from_str(ok).unwrap();
            assert!(serde_json::from_value::<NoParams>(v).is_ok(), "{ok}");
        }
        for bad in ["{\"a\":1}", "[1]", "3", "\"x\"", "[null,null]"] {
            let v: Value = serde_json::from_str(bad).unwrap();
            assert!(serde_json::from_value::<NoParams>(v).is_err(), "{bad}");
        }
        assert!(Request::parse("workspace/list", serde_json::json!({"x": 1})).is_err());
        assert!(Request::parse("shutdown", serde_json::json!(["x"])).is_err());
        // Struct params are objects: no arrays by position, at the top or inside.
        assert!(Request::parse("session/load", serde_json::json!(["s1"])).is_err());
        for options in [
            serde_json::json!([]),
            serde_json::json!({"features": []}),
            serde_json::json!({"limits": [1, 2]}),
            serde_json::json!("x"),
        ] {
            let p = serde_json::json!({"workspaceId": "w", "options": options});
            assert!(Request::parse("prompt/assemble", p).is_err(), "{options}");
        }
        let p = serde_json::json!({"workspaceId": "w", "options": {"limits": {"memoryChars": 1}}});
        assert!(Request::parse("prompt/assemble", p).is_ok());
        let p = serde_json::json!({"workspaceId": "w", "options": null});
        assert!(Request::parse("prompt/assemble", p).is_ok());
        assert!(matches!(Request::parse("nope", Value::Null), Ok(None)));
    }

    #[test]
    fn lanes_fit_schedules() {
        for m in method_infos() {
            let fits = match m.schedule {
                Schedule::Inline => m.lane == Lane::Loop,
                Schedule::Cached => m.lane == Lane::Quick,
                Schedule::Blocking => {
                    matches!(m.lane, Lane::Quick | Lane::StartsMcp | Lane::Ordered)
                }
                Schedule::Spawned => m.lane == Lane::Long,
            };
            assert!(
                fits,
                "{}: {:?} does not fit {:?}",
                m.name, m.lane, m.schedule
            );
        }
        let lane = |method: &str, params: Value| match Request::parse(method, params) {
            Ok(Some(Request::Blocking(r))) => {
                let (lane, session) = r.lane();
                (lane, session.map(str::to_string))
            }
            other => panic!("{method}: {other:?}"),
        };
        let p = serde_json::json!({"sessionId": "s1"});
        assert_eq!(
            lane("session/load", p),
            (Lane::StartsMcp, Some("s1".into()))
        );
        let p = serde_json::json!({"workspaceId": "w"});
        assert_eq!(lane("session/new", p.clone()), (Lane::StartsMcp, None));
        assert_eq!(lane("session/list", p), (Lane::Quick, None));
    }

    #[test]
    fn notices_pass_lsp_params_on() {
        // LSP's params are the client's business: any shape is taken, as before the table.
        for params in [
            Value::Null,
            serde_json::json!({"x": 1}),
            serde_json::json!([1]),
        ] {
            assert!(matches!(
                Notice::parse("exit", params.clone()),
                Ok(Some(Notice::Exit(_)))
            ));
        }
        let p = serde_json::json!({"event": {"added": [], "removed": []}});
        assert!(matches!(
            Notice::parse("workspace/didChangeWorkspaceFolders", p.clone()),
            Ok(Some(Notice::DidChangeWorkspaceFolders(v))) if v == p
        ));
        assert!(matches!(Notice::parse("$/cancelRequest", p), Ok(None)));
    }
}

/// One row of the table, for the schema and the docs.
pub struct MethodInfo {
    /// The wire name.
    pub name: &'static str,
    /// Where it runs.
    pub schedule: Schedule,
    /// Its lane off the read loop.
    pub lane: Lane,
    /// Its params' schema (None: it takes none, or LSP's own).
    pub params: fn(&mut SchemaGenerator) -> Option<Value>,
    /// Its result's schema (None: `null`).
    pub result: fn(&mut SchemaGenerator) -> Option<Value>,
    /// The params type's name as written in the table (`none`, `lsp` or a type).
    pub params_name: &'static str,
    /// The result type's name as written in the table (`none` or a type).
    pub result_name: &'static str,
    /// The row's doc comment.
    pub doc: &'static str,
}

impl Schedule {
    /// How the documentation names it.
    pub fn describe(self) -> &'static str {
        match self {
            Schedule::Inline => "read loop",
            Schedule::Cached => "read loop if cached, else blocking pool",
            Schedule::Blocking => "blocking pool",
            Schedule::Spawned => "task",
        }
    }
}

/// The table as the Markdown list in `protocol/README.md` (between its `methods table`
/// markers), so the documentation's list cannot drift from dispatch.
pub fn methods_markdown() -> String {
    let mut out = String::from(
        "| method | runs on | lane | params | result | what it does |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for m in method_infos() {
        let ty = |n: &str| match n {
            "none" => "none".to_string(),
            "lsp" => "LSP's".to_string(),
            t => format!("`{t}`"),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            m.name,
            m.schedule.describe(),
            m.lane.describe(),
            ty(m.params_name),
            ty(m.result_name),
            m.doc.trim()
        ));
    }
    out
}

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Option<Value> {
    Some(g.subschema_for::<T>().to_value())
}

fn no_schema(_: &mut SchemaGenerator) -> Option<Value> {
    None
}

/// Declares the table. Each row: `Type = "name", Schedule, Lane, params -> result;` where
/// Lane is a [`Lane`] variant, `StartsMcp` naming the params' session field when the request
/// names a session (`StartsMcp(session_id)`); params is a type, `none` (no params) or `lsp`
/// (LSP's own params, not in our schema), and result is a type or `none`. Generates one
/// marker type per method implementing [`Method`], `METHODS`, [`method_infos`] and the parsed
/// [`Request`], split by schedule so a front handles each schedule in a function of its own
/// and the compiler checks every method is handled.
macro_rules! methods {
    ($( $(#[doc = $doc:literal])* $ty:ident = $name:literal, $sched:ident, $lane:ident $(($field:ident))?, $p:tt -> $r:tt; )*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl Method for $ty {
                const NAME: &'static str = $name;
                const SCHEDULE: Schedule = Schedule::$sched;
                const LANE: Lane = Lane::$lane;
                fn lane_session(params: &Self::Params) -> Option<&str> {
                    methods!(@session params $($field)?)
                }
                type Params = methods!(@ptype $p);
                type Result = methods!(@rtype $r);
                const BY_NAME: bool = methods!(@byname $p);
            }
        )*

        /// Names of the methods the native front answers, in documentation order.
        pub const METHODS: &[&str] = &[$($name),*];

        /// The table's rows, in documentation order.
        pub fn method_infos() -> Vec<MethodInfo> {
            vec![$(MethodInfo {
                name: $name,
                schedule: Schedule::$sched,
                lane: Lane::$lane,
                params: methods!(@pschema $p),
                result: methods!(@rschema $r),
                params_name: stringify!($p),
                result_name: stringify!($r),
                doc: concat!($($doc),*),
            }),*]
        }

        methods!(@split [] [] [] [] $($ty $sched,)*);
    };
    (@session $params:ident) => {{
        let _ = $params;
        None
    }};
    (@session $params:ident $field:ident) => { Some($params.$field.as_str()) };
    (@byname none) => { false };
    (@byname lsp) => { false };
    (@byname $t:ty) => { true };
    (@ptype none) => { NoParams };
    (@ptype lsp) => { Value };
    (@ptype $t:ty) => { $t };
    (@rtype none) => { Null };
    (@rtype $t:ty) => { $t };
    (@pschema none) => { no_schema };
    (@pschema lsp) => { no_schema };
    (@pschema $t:ty) => { schema_of::<$t> };
    (@rschema none) => { no_schema };
    (@rschema $t:ty) => { schema_of::<$t> };
    // Reads each request's lane from its row, so no front keeps a schedule of its own.
    (@lane $enum:ident $($v:ident)*) => {
        impl $enum {
            /// Its row's lane, and the session that decides a [`Lane::StartsMcp`] lane.
            pub fn lane(&self) -> (Lane, Option<&str>) {
                match *self {
                    $($enum::$v(ref p) => (<$v as Method>::LANE, <$v as Method>::lane_session(p)),)*
                }
            }
        }
    };
    // Sorts the rows into one list per schedule, then emits the request enums.
    (@split [$($i:ident)*] [$($c:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Inline, $($rest:tt)*) => {
        methods!(@split [$($i)* $ty] [$($c)*] [$($b)*] [$($s)*] $($rest)*);
    };
    (@split [$($i:ident)*] [$($c:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Cached, $($rest:tt)*) => {
        methods!(@split [$($i)*] [$($c)* $ty] [$($b)*] [$($s)*] $($rest)*);
    };
    (@split [$($i:ident)*] [$($c:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Blocking, $($rest:tt)*) => {
        methods!(@split [$($i)*] [$($c)*] [$($b)* $ty] [$($s)*] $($rest)*);
    };
    (@split [$($i:ident)*] [$($c:ident)*] [$($b:ident)*] [$($s:ident)*] $ty:ident Spawned, $($rest:tt)*) => {
        methods!(@split [$($i)*] [$($c)*] [$($b)*] [$($s)* $ty] $($rest)*);
    };
    (@split [$($i:ident)*] [$($c:ident)*] [$($b:ident)*] [$($s:ident)*]) => {
        /// A parsed request that runs on the read loop.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum InlineRequest { $($i(<$i as Method>::Params)),* }
        /// A parsed request answered from memory when it can be, else on the blocking pool.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum CachedRequest { $($c(<$c as Method>::Params)),* }
        /// A parsed request that runs on the blocking pool.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum BlockingRequest { $($b(<$b as Method>::Params)),* }
        /// A parsed request that runs as a task of its own.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum SpawnedRequest { $($s(<$s as Method>::Params)),* }

        methods!(@lane InlineRequest $($i)*);
        methods!(@lane CachedRequest $($c)*);
        methods!(@lane BlockingRequest $($b)*);
        methods!(@lane SpawnedRequest $($s)*);

        /// A request of the table with its params decoded, by schedule.
        #[derive(Debug)]
        pub enum Request {
            /// Runs on the read loop.
            Inline(InlineRequest),
            /// From memory when it can.
            Cached(CachedRequest),
            /// On the blocking pool.
            Blocking(BlockingRequest),
            /// As a task.
            Spawned(SpawnedRequest),
        }

        impl Request {
            /// Decodes a request; `Ok(None)` for a method not in the table.
            pub fn parse(method: &str, params: Value) -> Result<Option<Request>, serde_json::Error> {
                Ok(Some(match method {
                    $(<$i as Method>::NAME => Request::Inline(InlineRequest::$i(decode::<$i>(params)?)),)*
                    $(<$c as Method>::NAME => Request::Cached(CachedRequest::$c(decode::<$c>(params)?)),)*
                    $(<$b as Method>::NAME => Request::Blocking(BlockingRequest::$b(decode::<$b>(params)?)),)*
                    $(<$s as Method>::NAME => Request::Spawned(SpawnedRequest::$s(decode::<$s>(params)?)),)*
                    _ => return Ok(None),
                }))
            }
        }
    };
}

methods! {
    /// LSP `initialize`: opens the workspace folders, answers the capabilities.
    Initialize = "initialize", Blocking, Ordered, lsp -> InitializeResult;
    /// LSP `shutdown`.
    Shutdown = "shutdown", Inline, Loop, none -> none;
    /// Opens a workspace folder.
    OpenWorkspace = "workspace/open", Blocking, Quick, OpenParams -> WorkspaceInfo;
    /// Closes a workspace.
    CloseWorkspace = "workspace/close", Inline, Loop, WorkspaceRef -> CloseResult;
    /// The open workspaces.
    ListWorkspaces = "workspace/list", Inline, Loop, none -> ListResult;
    /// Assembles a workspace's system prompt.
    AssemblePrompt = "prompt/assemble", Cached, Quick, AssembleParams -> AssembleResult;
    /// Creates a session (a transcript file).
    NewSession = "session/new", Blocking, StartsMcp, NewSessionParams -> NewSessionResult;
    /// A workspace's sessions.
    ListSessions = "session/list", Blocking, Quick, WorkspaceRef -> SessionList;
    /// Loads a stored session.
    LoadSession = "session/load", Blocking, StartsMcp(session_id), SessionRef -> LoadResult;
    /// A page of a session's durable history.
    ReadMessages = "session/messages", Blocking, StartsMcp(session_id), MessagesParams -> MessagesPage;
    /// Copies a session.
    ForkSession = "session/fork", Blocking, Quick, ForkParams -> SessionRef;
    /// Deletes a session.
    DeleteSession = "session/delete", Blocking, Quick, SessionRef -> Ack;
    /// Switches a live session's model or approval policy.
    Configure = "session/configure", Blocking, StartsMcp(session_id), ConfigureParams -> ConfigureResult;
    /// Takes back "allow always" for a tool (or every tool) of a session.
    RevokePermission = "session/revokePermission", Blocking, Quick, RevokePermissionParams -> RevokePermissionResult;
    /// Runs one user turn.
    RunTurn = "turn/run", Spawned, Long, TurnParams -> TurnResult;
    /// Cancels a live session's running operation.
    CancelTurn = "turn/cancel", Inline, Loop, SessionRef -> Ack;
    /// The manual `/compact [focus]`.
    Compact = "session/compact", Spawned, Long, CompactParams -> CompactResult;
    /// Drops messages from the model's view.
    Snip = "session/snip", Blocking, StartsMcp(session_id), SnipParams -> SnipResult;
    /// Replaces a span of the view with a summary.
    Collapse = "session/collapse", Spawned, Long, CollapseParams -> CollapseResult;
    /// Reads the session memory, or replaces it with the user's notes.
    Memory = "session/memory", Blocking, StartsMcp(session_id), SessionMemoryParams -> SessionMemoryResult;
    /// The exact request the next step would send.
    ViewRequest = "session/view", Blocking, StartsMcp(session_id), SessionRef -> ViewResult;
    /// The context by part, what the requests used per purpose (`usageByPurpose`), and the MCP servers' instructions the model has (`mcpInstructions`).
    InspectContext = "context/inspect", Blocking, StartsMcp(session_id), SessionRef -> InspectResult;
    /// The MCP servers of a live session, with their state and tool counts.
    McpServers = "mcp/servers", Inline, Loop, SessionRef -> McpServersResult;
}

/// A notification the client sends the server.
pub trait Notification {
    /// The wire name.
    const NAME: &'static str;
    /// Its params.
    type Params: DeserializeOwned + Send + 'static;
}

/// Declares the client's notifications: `Type = "name", params;` where params is a type or
/// `lsp` (LSP's own, passed on undecoded). Generates one marker type per notification
/// implementing [`Notification`] and the parsed [`Notice`], so a front handles them in one
/// exhaustive `match`. `$/cancelRequest` is not a row: the transport handles it for every
/// front, before any handler sees it.
macro_rules! notifications {
    ($( $(#[doc = $doc:literal])* $ty:ident = $name:literal, $p:tt; )*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl Notification for $ty {
                const NAME: &'static str = $name;
                type Params = methods!(@ptype $p);
            }
        )*

        /// A notification of the table with its params decoded.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum Notice { $($ty(<$ty as Notification>::Params)),* }

        impl Notice {
            /// Decodes a notification; `Ok(None)` for one not in the table.
            pub fn parse(method: &str, params: Value) -> Result<Option<Notice>, serde_json::Error> {
                Ok(Some(match method {
                    $(<$ty as Notification>::NAME => Notice::$ty(serde_json::from_value(params)?),)*
                    _ => return Ok(None),
                }))
            }
        }
    };
}

notifications! {
    /// LSP `initialized`: nothing to do, requests work once `initialize` is answered.
    Initialized = "initialized", lsp;
    /// LSP `exit`: stop serving, with code 0 after `shutdown`, else 1 (also before
    /// `initialize`).
    Exit = "exit", lsp;
    /// LSP's folder change: the removed folders' workspaces close, the added folders open.
    DidChangeWorkspaceFolders = "workspace/didChangeWorkspaceFolders", lsp;
}

/// What a server-to-client method is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A notification: no answer.
    Notification,
    /// A request: the client answers.
    Request,
}

/// A method the server calls or notifies on the client.
pub trait ClientMethod {
    /// The wire name.
    const NAME: &'static str;
    /// Notification or request.
    const DIRECTION: Direction;
    /// Its params.
    type Params: Serialize;
    /// Its result (`Value` for a notification, which has none).
    type Result: DeserializeOwned;
}

/// One server-to-client row, for the schema.
pub struct ClientMethodInfo {
    /// The wire name.
    pub name: &'static str,
    /// Notification or request.
    pub direction: Direction,
    /// Its params' schema.
    pub params: fn(&mut SchemaGenerator) -> Option<Value>,
    /// Its result's schema (None: a notification).
    pub result: fn(&mut SchemaGenerator) -> Option<Value>,
}

/// Declares the server-to-client table: `Type = "name", notification Params;` or
/// `Type = "name", request Params -> Result;`. Generates the marker types in [`client`] and
/// [`client_method_infos`]; types are written as `crate::` paths, since the marker types
/// share their names.
macro_rules! client_methods {
    ($( $(#[doc = $doc:literal])* $ty:ident = $name:literal, $dir:ident $p:ty $(=> $r:ty)?; )*) => {
        /// The methods the server calls or notifies on the client, one marker type each.
        pub mod client {
            use super::*;
            $(
                $(#[doc = $doc])*
                #[derive(Debug, Clone, Copy)]
                pub struct $ty;
                impl ClientMethod for $ty {
                    const NAME: &'static str = $name;
                    const DIRECTION: Direction = client_methods!(@dir $dir);
                    type Params = $p;
                    type Result = client_methods!(@rtype $($r)?);
                }
            )*
        }

        /// The server-to-client rows, in documentation order.
        pub fn client_method_infos() -> Vec<ClientMethodInfo> {
            vec![$(ClientMethodInfo {
                name: $name,
                direction: client_methods!(@dir $dir),
                params: schema_of::<$p>,
                result: client_methods!(@rschema $($r)?),
            }),*]
        }
    };
    (@dir notification) => { Direction::Notification };
    (@dir request) => { Direction::Request };
    (@rtype) => { Value };
    (@rtype $r:ty) => { $r };
    (@rschema) => { no_schema };
    (@rschema $r:ty) => { schema_of::<$r> };
}

client_methods! {
    /// LSP work-done progress of `session/compact`.
    Progress = "$/progress", notification crate::ProgressParams;
    /// Instruction or memory files of a workspace changed on disk.
    ContextChanged = "workspace/contextChanged", notification crate::ContextChanged;
    /// What a running turn does.
    TurnUpdate = "turn/update", notification crate::TurnUpdate;
    /// A problem of the user's config file (or the file in force again), for the user.
    ShowMessage = "window/showMessage", notification crate::ShowMessageParams;
    /// Asks the user to approve a tool call.
    PermissionRequest = "permission/request", request crate::PermissionRequest => crate::PermissionResult;
    /// Runs a tool the client registered.
    ToolCall = "tool/call", request crate::ToolCallParams => crate::ToolCallResult;
    /// Hands a file edit to the editor (sent only to clients that advertised
    /// `capabilities.workspace.applyEdit`).
    ApplyEdit = "workspace/applyEdit", request crate::ApplyEditParams => crate::ApplyEditResult;
    /// Asks the person for what an MCP server requested during a tool call (sent only to
    /// clients that advertised `capabilities.experimental.garuda.elicitation`).
    Elicit = "mcp/elicit", request crate::ElicitParams => crate::ElicitResult;
    /// Definitions by name from the editor's language servers, for a `find_symbol` call
    /// (sent only to clients that declared `capabilities.experimental.garuda.codeSymbols`;
    /// answered within 3 s or cancelled, `null` for none).
    FindSymbol = "code/findSymbol", request crate::FindSymbolParams => Option<crate::FindSymbolResult>;
    /// The uses of a symbol from the editor's language servers, for a `find_references`
    /// call (as `code/findSymbol`).
    FindReferences = "code/findReferences", request crate::FindReferencesParams => Option<crate::FindReferencesResult>;
    /// LSP: opens an MCP server's sign-in page in the person's browser (sent only to clients
    /// that advertised `capabilities.window.showDocument.support`).
    ShowDocument = "window/showDocument", request crate::ShowDocumentParams => crate::ShowDocumentResult;
}
