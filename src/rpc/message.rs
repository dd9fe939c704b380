//! One frame in, one [`Incoming`] out; outgoing messages serialized with `"jsonrpc":"2.0"`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::RpcError;

/// A request id: an integer or a string (JSON-RPC allows both; `null` and fractions are refused).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    /// A numeric id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

/// A message read from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call that expects an answer.
    Request {
        /// The id to answer with.
        id: Id,
        /// The method name.
        method: String,
        /// The params; `Value::Null` when absent.
        params: Value,
    },
    /// A call without an answer.
    Notification {
        /// The method name.
        method: String,
        /// The params; `Value::Null` when absent.
        params: Value,
    },
    /// The peer's answer to one of our requests.
    Response {
        /// The id of our request.
        id: Id,
        /// `result` or `error`.
        result: Result<Value, RpcError>,
    },
}

/// Why a frame could not be read as a message, and how to answer it.
#[derive(Debug, Clone, PartialEq)]
pub struct BadFrame {
    /// The id read from the frame, if any (`null` in the answer otherwise).
    pub id: Option<Id>,
    /// The error to answer with (boxed: a `serde_json::Value` inside is large with
    /// `preserve_order`, and this travels in every parse result).
    pub error: Box<RpcError>,
    /// False when the frame looked like a response: responses are never answered, only logged.
    pub reply: bool,
}

impl BadFrame {
    fn answer(id: Option<Id>, error: RpcError) -> Self {
        Self {
            id,
            error: Box::new(error),
            reply: true,
        }
    }
}

/// Parses one frame body into a message.
///
/// Batches (JSON arrays) are not supported and are answered with -32600.
pub fn parse(frame: &[u8]) -> Result<Incoming, BadFrame> {
    let text = match std::str::from_utf8(frame) {
        Ok(t) => t,
        Err(e) => {
            // Answering with the id, when the rest is readable, saves the client from waiting.
            let lossy = String::from_utf8_lossy(frame);
            let id = serde_json::from_str::<Value>(&lossy)
                .ok()
                .and_then(|v| v.as_object().and_then(|o| o.get("id").cloned()))
                .and_then(|v| serde_json::from_value::<Id>(v).ok());
            return Err(BadFrame::answer(
                id,
                RpcError::parse_error(format!("invalid UTF-8 in message: {e}")),
            ));
        }
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| BadFrame::answer(None, RpcError::parse_error(format!("parse error: {e}"))))?;
    from_value(value)
}

/// Validates a parsed JSON value as a message.
pub fn from_value(value: Value) -> Result<Incoming, BadFrame> {
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(BadFrame::answer(
                None,
                RpcError::invalid_request("batch requests are not supported"),
            ));
        }
        _ => {
            return Err(BadFrame::answer(
                None,
                RpcError::invalid_request("a message must be a JSON object"),
            ));
        }
    };
    let raw_id = obj.remove("id");
    let id = match &raw_id {
        None | Some(Value::Null) => None,
        Some(v) => match serde_json::from_value::<Id>(v.clone()) {
            Ok(id) => Some(id),
            Err(_) => {
                return Err(BadFrame::answer(
                    None,
                    RpcError::invalid_request("id must be an integer or a string"),
                ));
            }
        },
    };
    let invalid =
        |id: &Option<Id>, msg: &str| BadFrame::answer(id.clone(), RpcError::invalid_request(msg));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(&id, "\"jsonrpc\" must be \"2.0\""));
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params").unwrap_or(Value::Null);
            if !matches!(params, Value::Null | Value::Object(_) | Value::Array(_)) {
                return Err(invalid(&id, "params must be an object or an array"));
            }
            match (id, raw_id) {
                (Some(id), _) => Ok(Incoming::Request { id, method, params }),
                (None, Some(Value::Null)) => Err(invalid(&None, "id must not be null")),
                (None, _) => Ok(Incoming::Notification { method, params }),
            }
        }
        Some(_) => Err(invalid(&id, "method must be a string")),
        None => parse_response(id, obj),
    }
}

fn parse_response(id: Option<Id>, mut obj: Map<String, Value>) -> Result<Incoming, BadFrame> {
    let bad = |id: Option<Id>, msg: &str| BadFrame {
        id,
        error: Box::new(RpcError::invalid_request(msg)),
        reply: false,
    };
    let result = match (obj.remove("result"), obj.remove("error")) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => match serde_json::from_value::<RpcError>(e) {
            Ok(e) => Err(e),
            Err(_) => return Err(bad(id, "response error is not an error object")),
        },
        // Neither a request nor a response: answer it as an invalid request, since a
        // client that sent it with an id is waiting for something.
        (None, None) => {
            return Err(BadFrame {
                reply: true,
                ..bad(id, "message has no method, result or error")
            });
        }
        (Some(_), Some(_)) => return Err(bad(id, "response has both result and error")),
    };
    match id {
        Some(id) => Ok(Incoming::Response { id, result }),
        None => Err(BadFrame {
            id: None,
            error: Box::new(
                result
                    .err()
                    .unwrap_or_else(|| RpcError::invalid_request("response without id")),
            ),
            reply: false,
        }),
    }
}

#[derive(Serialize)]
struct OutRequest<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    method: &'a str,
    #[serde(skip_serializing_if = "Value::is_null")]
    params: &'a Value,
}

#[derive(Serialize)]
struct OutNotification<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Value::is_null")]
    params: &'a Value,
}

#[derive(Serialize)]
struct OutResult<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    result: &'a Value,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    error: &'a RpcError,
}

fn to_bytes<T: Serialize>(msg: &T) -> Vec<u8> {
    serde_json::to_vec(msg).unwrap_or_else(|e| {
        // Only a non-string map key can fail here, which `Value` cannot hold; stay total anyway.
        tracing::error!("cannot serialize an outgoing message: {e}");
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"unserializable message"}}"#
            .to_vec()
    })
}

/// Serializes a response (`id` is `null` when unknown).
pub fn encode_response(id: Option<&Id>, result: &Result<Value, RpcError>) -> Vec<u8> {
    match result {
        Ok(result) => to_bytes(&OutResult {
            jsonrpc: "2.0",
            id,
            result,
        }),
        Err(error) => to_bytes(&OutError {
            jsonrpc: "2.0",
            id,
            error,
        }),
    }
}

/// Serializes a notification; `params` is omitted when `Null`.
pub fn encode_notification(method: &str, params: &Value) -> Vec<u8> {
    to_bytes(&OutNotification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// Serializes a request; `params` is omitted when `Null`.
pub fn encode_request(id: &Id, method: &str, params: &Value) -> Vec<u8> {
    to_bytes(&OutRequest {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// Reads a top-level `"id"` (integer or string) from the start of a possibly truncated JSON
/// object, as kept from an oversize or skipped frame.
pub fn extract_id(prefix: &[u8]) -> Option<Id> {
    let mut i = 0;
    let mut depth = 0usize;
    let n = prefix.len();
    while i < n {
        match prefix[i] {
            b'"' => {
                let end = string_end(prefix, i)?;
                if depth == 1 && &prefix[i..end] == b"\"id\"" {
                    let mut j = skip_ws(prefix, end);
                    if prefix.get(j) == Some(&b':') {
                        j = skip_ws(prefix, j + 1);
                        return read_id_value(prefix, j);
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return None;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Index just past the closing quote of the string starting at `start`, if complete.
fn string_end(s: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

fn read_id_value(s: &[u8], i: usize) -> Option<Id> {
    match s.get(i)? {
        b'"' => {
            let end = string_end(s, i)?;
            let text = std::str::from_utf8(&s[i..end]).ok()?;
            serde_json::from_str::<String>(text).ok().map(Id::String)
        }
        b'-' | b'0'..=b'9' => {
            let mut end = i + 1;
            while end < s.len() && s[end].is_ascii_digit() {
                end += 1;
            }
            // A number running into the end of the prefix may have been cut.
            if !matches!(s.get(end), Some(b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n')) {
                return None;
            }
            std::str::from_utf8(&s[i..end])
                .ok()?
                .parse()
                .ok()
                .map(Id::Number)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::error::codes;
    use serde_json::json;

    fn p(s: &str) -> Result<Incoming, BadFrame> {
        parse(s.as_bytes())
    }

    #[test]
    fn parses_request_notification_response() {
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}}"#),
            Ok(Incoming::Request {
                id: Id::Number(1),
                method: "a".into(),
                params: json!({"x":1})
            })
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":"q","method":"a"}"#),
            Ok(Incoming::Request {
                id: Id::String("q".into()),
                method: "a".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","method":"n","params":[1]}"#),
            Ok(Incoming::Notification {
                method: "n".into(),
                params: json!([1])
            })
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":7,"result":null}"#),
            Ok(Incoming::Response {
                id: Id::Number(7),
                result: Ok(Value::Null)
            })
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#),
            Ok(Incoming::Response {
                id: Id::Number(7),
                result: Err(RpcError::new(-32601, "no"))
            })
        );
    }

    fn err(s: &[u8]) -> BadFrame {
        parse(s).unwrap_err()
    }

    #[test]
    fn malformed_json_is_parse_error_with_null_id() {
        let e = err(br#"{"jsonrpc":"2.0","id":3,"method":"#);
        assert_eq!(
            (e.id, e.error.code, e.reply),
            (None, codes::PARSE_ERROR, true)
        );
    }

    #[test]
    fn invalid_utf8_is_parse_error_keeping_the_id() {
        let e = err(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"a\xff\"}");
        assert_eq!(e.error.code, codes::PARSE_ERROR);
        assert_eq!(e.id, Some(Id::Number(4)));
        let e = err(b"\xff\xfe");
        assert_eq!((e.id, e.error.code), (None, codes::PARSE_ERROR));
    }

    #[test]
    fn invalid_requests() {
        for (s, id) in [
            (r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#, None),
            (r#"42"#, None),
            (r#"{"id":5,"method":"a"}"#, Some(Id::Number(5))),
            (
                r#"{"jsonrpc":"1.0","id":"s","method":"a"}"#,
                Some(Id::from("s")),
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":3}"#,
                Some(Id::Number(6)),
            ),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"a"}"#, None),
            (r#"{"jsonrpc":"2.0","id":{},"method":"a"}"#, None),
            (r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"a","params":"x"}"#,
                Some(Id::Number(8)),
            ),
        ] {
            let e = err(s.as_bytes());
            assert_eq!(e.error.code, codes::INVALID_REQUEST, "{s}");
            assert_eq!(e.id, id, "{s}");
            assert!(e.reply, "{s}");
        }
    }

    #[test]
    fn bad_responses_are_not_answered() {
        let empty = err(br#"{"jsonrpc":"2.0","id":1}"#);
        assert!(empty.reply, "neither request nor response: answered");
        for s in [
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":"nope"}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
        ] {
            assert!(!err(s.as_bytes()).reply, "{s}");
        }
    }

    #[test]
    fn encodes_with_version() {
        let r = encode_response(Some(&Id::Number(1)), &Ok(Value::Null));
        assert_eq!(r, br#"{"jsonrpc":"2.0","id":1,"result":null}"#);
        let r = encode_response(None, &Err(RpcError::parse_error("x")));
        assert_eq!(
            r,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#
        );
        assert_eq!(
            encode_notification("n", &Value::Null),
            br#"{"jsonrpc":"2.0","method":"n"}"#
        );
        let r = encode_request(&Id::from("a"), "m", &json!([1]));
        assert_eq!(
            r,
            br#"{"jsonrpc":"2.0","id":"a","method":"m","params":[1]}"#
        );
        // Round trip through the parser.
        assert_eq!(
            parse(&r),
            Ok(Incoming::Request {
                id: Id::from("a"),
                method: "m".into(),
                params: json!([1])
            })
        );
    }

    #[test]
    fn extracts_id_from_truncated_prefix() {
        let x = |s: &str| extract_id(s.as_bytes());
        assert_eq!(
            x(r#"{"jsonrpc":"2.0","id":12,"method":"a","params":{"t":"xxxx"#),
            Some(Id::Number(12))
        );
        assert_eq!(
            x(r#"{"method":"a","params":{"id":1,"t":"x"},"id" : "k\"q","#),
            Some(Id::from("k\"q"))
        );
        assert_eq!(x(r#"{"params":{"id":3},"text":"\"id\":4"#), None);
        assert_eq!(x(r#"{"jsonrpc":"2.0","id":12"#), None, "number may be cut");
        assert_eq!(x(r#"{"id":"abc"#), None);
        assert_eq!(x(r#"{"id":-5}"#), Some(Id::Number(-5)));
        assert_eq!(x(r#"{"a":1}{"id":1}"#), None);
        assert_eq!(x("garbage"), None);
        assert_eq!(x(""), None);
        assert_eq!(Id::Number(3).to_string(), "3");
        assert_eq!(Id::from("a").to_string(), "\"a\"");
    }
}
