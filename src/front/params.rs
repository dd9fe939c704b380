//! Typed parameters with -32602 errors that say what is wrong.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::rpc::RpcError;

/// Decodes `params` into `T`; absent params decode as `{}` so all-optional types work.
pub fn parse_params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}
