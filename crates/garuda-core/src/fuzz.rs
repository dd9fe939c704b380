//! The fuzz targets' shared settings: proptest generators in the normal test binary, a
//! bounded number of cases in CI and as many as you like by hand:
//!
//! ```sh
//! GARUDA_FUZZ_CASES=200000 cargo test -p garuda-core fuzz_ -- --nocapture
//! ```

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
