//! Garuda's own JSON-RPC error codes, the range `-32050..=-32099`. The standard JSON-RPC and
//! LSP codes belong to the transport.

/// First (highest) code of Garuda's own range.
pub const GARUDA_RANGE_START: i64 = -32050;
/// Last (lowest) code of Garuda's own range.
pub const GARUDA_RANGE_END: i64 = -32099;

/// The `workspaceId` names no open workspace.
pub const WORKSPACE_NOT_OPEN: i64 = -32050;
/// The `sessionId` names no known session.
pub const SESSION_NOT_FOUND: i64 = -32051;
/// The model provider failed (HTTP error, bad answer, network down).
pub const PROVIDER_ERROR: i64 = -32052;
/// The conversation does not fit the model's context window, even after compaction.
pub const CONTEXT_OVERFLOW: i64 = -32053;
/// Too many requests in flight; retry later.
pub const OVERLOADED: i64 = -32054;
/// A path resolves outside the workspace root.
pub const OUTSIDE_ROOT: i64 = -32055;
/// The target (e.g. a session running a turn) is busy with another request.
pub const BUSY: i64 = -32056;
/// The configuration is invalid (bad TOML, bad value), with the file and line in `data`.
pub const CONFIG_ERROR: i64 = -32057;
/// A named thing (file, tool, model, memory entry) does not exist.
pub const NOT_FOUND: i64 = -32058;
/// A tool call failed in a way the caller must see as an error.
pub const TOOL_ERROR: i64 = -32059;
/// The user's message alone does not fit the model's context window.
pub const PROMPT_TOO_LONG: i64 = -32060;
/// The provider rejected the credentials (missing or invalid key).
pub const AUTH_ERROR: i64 = -32061;
/// A hook of the user's refused the request (a prompt, a manual compaction); `data.reason`.
pub const BLOCKED_BY_HOOK: i64 = -32062;

/// Whether `code` lies in Garuda's own range.
pub fn is_garuda_code(code: i64) -> bool {
    (GARUDA_RANGE_END..=GARUDA_RANGE_START).contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_in_range() {
        for c in [
            WORKSPACE_NOT_OPEN,
            SESSION_NOT_FOUND,
            PROVIDER_ERROR,
            CONTEXT_OVERFLOW,
            OVERLOADED,
            OUTSIDE_ROOT,
            BUSY,
            CONFIG_ERROR,
            NOT_FOUND,
            TOOL_ERROR,
            PROMPT_TOO_LONG,
            AUTH_ERROR,
            BLOCKED_BY_HOOK,
        ] {
            assert!(is_garuda_code(c), "{c}");
        }
        assert!(!is_garuda_code(-32700));
        assert!(!is_garuda_code(-32002));
    }
}
