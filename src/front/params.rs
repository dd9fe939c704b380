//! Typed parameters with -32602 errors that say what is wrong.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::rpc::RpcError;

/// Decodes `params` into `T`; absent params decode as `{}` so all-optional types work. Params
/// are named: an array (serde would read it as the fields by position) is refused.
pub fn parse_params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = match params {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => params,
        _ => {
            return Err(RpcError::invalid_params(
                "invalid params: expected an object of named params",
            ));
        }
    };
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::v1::{
        CancelNotification, LoadSessionRequest, NewSessionRequest, PromptRequest,
    };
    use garuda_protocol::{METHODS, Request};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::fuzz::config(512))]

        /// Fuzz target: params decoding of every native method and every ACP request type,
        /// on arbitrary JSON: never a panic, and an error is always a -32602 with a message.
        #[test]
        fn fuzz_params_of_every_method(params in crate::fuzz::json()) {
            for m in METHODS {
                let _ = Request::parse(m, params.clone());
            }
            for e in [
                parse_params::<NewSessionRequest>(params.clone()).err(),
                parse_params::<LoadSessionRequest>(params.clone()).err(),
                parse_params::<PromptRequest>(params.clone()).err(),
                parse_params::<CancelNotification>(params.clone()).err(),
            ]
            .into_iter()
            .flatten()
            {
                prop_assert_eq!(e.code, crate::rpc::codes::INVALID_PARAMS);
                prop_assert!(!e.message.is_empty());
            }
        }

        /// Fuzz target: whole messages (bytes after framing) never panic the parser.
        #[test]
        fn fuzz_message_parse(v in crate::fuzz::json(), raw in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = crate::rpc::message::parse(&serde_json::to_vec(&v).unwrap());
            let _ = crate::rpc::message::parse(&raw);
            let msg = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": v});
            let _ = crate::rpc::message::parse(&serde_json::to_vec(&msg).unwrap());
        }
    }

    #[test]
    fn arrays_are_not_named_params() {
        let e = parse_params::<CancelNotification>(serde_json::json!(["s1"])).unwrap_err();
        assert_eq!(e.code, crate::rpc::codes::INVALID_PARAMS);
    }
}
