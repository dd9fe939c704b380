//! Garuda's integration tests: one binary that spawns the real `garuda` and speaks its protocols.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acp;
mod agents;
mod attacks;
mod cli;
mod client;
mod config_errors;
mod configure;
mod context;
mod escape;
mod exec;
mod fidelity;
mod hardening;
mod hooks;
mod instruction_notes;
mod instructions;
mod load;
mod long_session;
mod mcp;
mod mcp_background;
mod mcp_conformance;
mod mcp_elicit;
mod mcp_oauth;
mod mcp_tasks;
mod mock_model;
mod mock_smoke;
mod pipeline;
mod plan_mode;
mod sandbox;
mod server;
mod sim_provider;
mod skills;
mod small_window;
mod turns;
mod worker;
