//! The fuzz targets' shared settings (as in `garuda_core`'s): proptest generators in the
//! normal test binary, a bounded number of cases in CI and as many as you like by hand:
//!
//! ```sh
//! GARUDA_FUZZ_CASES=200000 cargo test --lib fuzz_
//! ```

use proptest::prelude::*;
use serde_json::Value;

/// A proptest config running `default` cases, or `GARUDA_FUZZ_CASES` when set.
pub(crate) fn config(default: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("GARUDA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    proptest::test_runner::Config {
        cases,
        // Fuzz targets keep no regression files; a failure prints its minimal input.
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Arbitrary JSON, biased towards the names and shapes the protocols use.
pub(crate) fn json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("workspaceId".to_string()),
        Just("sessionId".to_string()),
        Just("path".to_string()),
        Just("options".to_string()),
        Just("limits".to_string()),
        Just("features".to_string()),
        Just("text".to_string()),
        Just("content".to_string()),
        Just("cursor".to_string()),
        Just("protocolVersion".to_string()),
        Just("cwd".to_string()),
        Just("prompt".to_string()),
        "[a-zA-Z]{0,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        Just(Value::String("/tmp".into())),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}
