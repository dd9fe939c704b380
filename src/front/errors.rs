//! Engine errors as JSON-RPC errors, one mapping for both fronts: a client sees the same code
//! and `data` for the same failure whichever protocol it speaks (ACP adds only its own
//! "resource not found" for unknown sessions).

use serde_json::json;

use super::wire as cv;
use crate::rpc::RpcError;
use garuda_core::engine::EngineError;
use garuda_core::fsroot::FsError;
use garuda_core::workspace::WorkspaceError;
use garuda_protocol::codes;

/// Maps engine errors to protocol errors; provider errors carry their kind in `data`.
pub fn engine_error(e: EngineError) -> RpcError {
    use garuda_core::provider::ProviderError as P;
    use garuda_core::session::StoreError as S;
    use garuda_core::turn::TurnError as T;
    let provider = |p: P| {
        let code = match &p {
            P::Config(_) | P::MissingKey { .. } => codes::CONFIG_ERROR,
            P::Auth { .. } => codes::AUTH_ERROR,
            // Reactive compaction already ran and one retry failed: the context itself overflows.
            P::PromptTooLong(_) => codes::CONTEXT_OVERFLOW,
            _ => codes::PROVIDER_ERROR,
        };
        // A client names its own setting for the variable, so the data says which it is.
        let data = match &p {
            P::MissingKey {
                provider, variable, ..
            } => {
                json!({"kind": p.kind(), "reason": "missingKey", "provider": provider, "variable": variable})
            }
            _ => json!({"kind": p.kind()}),
        };
        RpcError {
            code,
            message: p.to_string(),
            data: Some(data),
        }
    };
    let store = |s: S| match s {
        S::NotFound(id) => {
            RpcError::new(codes::SESSION_NOT_FOUND, format!("session {id} not found"))
        }
        e @ S::InvalidId(_) => RpcError::invalid_params(e.to_string()),
        e @ S::MessageNotFound(_) => RpcError::new(codes::NOT_FOUND, e.to_string()),
        e => RpcError::internal(e.to_string()),
    };
    match e {
        EngineError::Workspace(w) => ws_error(w),
        EngineError::SessionNotFound(id) => {
            RpcError::new(codes::SESSION_NOT_FOUND, format!("session {id} not found"))
        }
        EngineError::Store(s) | EngineError::Turn(T::Store(s)) => store(s),
        EngineError::Provider(p) | EngineError::Turn(T::Provider(p)) => provider(p),
        EngineError::Turn(T::AgentRunning {
            session_id,
            agent,
            parent_session_id,
            tool_call_id,
        }) => {
            let data = json!({
                "kind": "agentRunning",
                "sessionId": session_id,
                "agent": agent,
                "parentSessionId": parent_session_id,
                "parentToolCallId": tool_call_id,
            });
            let message = T::AgentRunning {
                session_id,
                agent,
                parent_session_id,
                tool_call_id,
            }
            .to_string();
            RpcError {
                code: codes::BUSY,
                message,
                data: Some(data),
            }
        }
        EngineError::Turn(T::Busy(id)) => RpcError::new(
            codes::BUSY,
            format!("session {id} is already running a turn; wait for it or cancel it"),
        ),
        EngineError::Turn(T::Invalid(m)) | EngineError::Invalid(m) => RpcError::invalid_params(m),
        // The provider answered, but not with what was asked: the model's failure.
        EngineError::Turn(T::NoSummary(m)) => RpcError {
            code: codes::PROVIDER_ERROR,
            message: m,
            data: Some(json!({"kind": "noSummary"})),
        },
        EngineError::Turn(T::Cancelled) => RpcError::request_cancelled(),
        EngineError::Turn(T::Blocked(reason)) => RpcError {
            code: codes::BLOCKED_BY_HOOK,
            message: T::Blocked(reason.clone()).to_string(),
            data: Some(json!({"kind": "hook", "reason": reason})),
        },
        EngineError::Turn(T::TooLarge {
            message_tokens,
            fixed_tokens,
            window_tokens,
        }) => {
            let message = T::TooLarge {
                message_tokens,
                fixed_tokens,
                window_tokens,
            }
            .to_string();
            RpcError {
                code: codes::PROMPT_TOO_LONG,
                message,
                data: Some(json!({
                    "kind": "messageTooLarge",
                    "messageTokens": message_tokens,
                    "fixedTokens": fixed_tokens,
                    "windowTokens": window_tokens,
                })),
            }
        }
        EngineError::Turn(
            e @ T::OverLimit {
                context_tokens,
                limit_tokens,
                window_tokens,
            },
        ) => RpcError {
            code: codes::PROMPT_TOO_LONG,
            message: e.to_string(),
            data: Some(json!({
                "kind": "blockingLimit",
                "contextTokens": context_tokens,
                "limitTokens": limit_tokens,
                "windowTokens": window_tokens,
            })),
        },
        EngineError::Turn(
            e @ T::DoesNotFit {
                fixed_tokens,
                history_tokens,
                message_tokens,
                output_tokens,
                window_tokens,
            },
        ) => RpcError {
            code: codes::PROMPT_TOO_LONG,
            message: e.to_string(),
            data: Some(json!({
                "kind": "doesNotFit",
                "fixedTokens": fixed_tokens,
                "historyTokens": history_tokens,
                "messageTokens": message_tokens,
                "outputTokens": output_tokens,
                "windowTokens": window_tokens,
            })),
        },
        EngineError::Config(m) => RpcError::new(codes::CONFIG_ERROR, m),
        EngineError::ConfigFile(problems) => {
            let message = EngineError::ConfigFile(problems.clone()).to_string();
            let problems: Vec<_> = problems.into_iter().map(cv::config_problem_out).collect();
            RpcError {
                code: codes::CONFIG_ERROR,
                message,
                data: Some(json!({"kind": "config", "reason": "configFile", "problems": problems})),
            }
        }
        e @ EngineError::NoModel => RpcError {
            code: codes::CONFIG_ERROR,
            message: e.to_string(),
            data: Some(json!({"kind": "config", "reason": "noModel"})),
        },
    }
}

/// Maps workspace errors to protocol errors (also inside [`engine_error`]).
pub fn ws_error(e: WorkspaceError) -> RpcError {
    match e {
        WorkspaceError::NotOpen(id) => RpcError::new(
            codes::WORKSPACE_NOT_OPEN,
            format!("workspace {id} is not open; call workspace/open first"),
        ),
        WorkspaceError::Config(c) => RpcError::new(codes::CONFIG_ERROR, c.to_string()),
        WorkspaceError::Root(FsError::OutsideRoot(p)) => RpcError::new(
            codes::OUTSIDE_ROOT,
            format!("{}: outside the workspace root", p.display()),
        ),
        WorkspaceError::Root(e @ FsError::NotFound(_)) => {
            RpcError::new(codes::NOT_FOUND, e.to_string())
        }
        WorkspaceError::Root(e) => RpcError::invalid_params(e.to_string()),
    }
}
