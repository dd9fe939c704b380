//! JSON-RPC error objects and the standard error codes. An application's own codes (Garuda's
//! are in `garuda_protocol::codes`) come from the handler.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The JSON-RPC 2.0 and LSP standard error codes.
pub mod codes {
    /// The frame is not valid JSON or not valid UTF-8; the id is unknown, so it is `null`.
    pub const PARSE_ERROR: i64 = -32700;
    /// Valid JSON that is not a request: not an object, wrong `jsonrpc`, bad `id` or `method`,
    /// scalar `params`, a batch array, a duplicate in-flight id, or a framing error
    /// (oversize frame, bad `Content-Length`).
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method is not known to the server.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The method exists but its `params` do not have the expected shape.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A bug or unexpected failure inside the server (also: a handler panicked).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A request other than `initialize` arrived before `initialize` (LSP).
    pub const SERVER_NOT_INITIALIZED: i64 = -32002;
    /// The request was cancelled by `$/cancelRequest`, by end of input, or timed out (LSP).
    pub const REQUEST_CANCELLED: i64 = -32800;
}

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// One of [`codes`] (or any code the peer sent).
    pub code: i64,
    /// A short human-readable description.
    pub message: String,
    /// Optional structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with any code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured details.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700: the frame is not JSON or not UTF-8.
    pub fn parse_error(message: impl Into<String>) -> Self {
        Self::new(codes::PARSE_ERROR, message)
    }

    /// -32600: the frame is not a valid request.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_REQUEST, message)
    }

    /// -32601 for `method`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            codes::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
        )
    }

    /// -32602: bad params.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, message)
    }

    /// -32603: internal error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(codes::INTERNAL_ERROR, message)
    }

    /// -32002: a request before `initialize`; the message names the request, as each
    /// protocol words it.
    pub fn not_initialized(message: impl Into<String>) -> Self {
        Self::new(codes::SERVER_NOT_INITIALIZED, message)
    }

    /// -32800: the request was cancelled.
    pub fn request_cancelled() -> Self {
        Self::new(codes::REQUEST_CANCELLED, "request cancelled")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_without_empty_data() {
        let e = RpcError::method_not_found("x/y");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"code": -32601, "message": "method not found: x/y"})
        );
        let e = RpcError::invalid_params("bad").with_data(json!({"field": "root"}));
        let back: RpcError = serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
