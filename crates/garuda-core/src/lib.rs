//! Garuda's engine: workspaces and their watched instruction files, system prompt assembly,
//! sessions with their durable transcripts and the context pipeline, turns against model
//! providers, tools, the sandbox commands run in, and root-confined file access.
//!
//! It knows nothing of JSON-RPC: the `garuda` binary's fronts turn protocol messages into
//! calls of [`engine::Engine`] and its results back into wire types.

// Every public item is documented, and `pub` means reachable from outside the crate: what
// only the crate uses says `pub(crate)`, so a reader knows the surface the fronts build on.
#![warn(missing_docs, unreachable_pub)]

pub mod agents;
pub mod code;
pub mod config;
pub mod dirs;
pub mod engine;
pub mod fsroot;
pub mod hooks;
pub mod listing;
pub mod mcp;
pub mod message;
pub mod prompt;
pub mod provider;
pub mod sandbox;
pub mod session;
pub mod skills;
pub mod text;
pub mod tools;
pub mod turn;
pub mod web;
pub mod workspace;

#[cfg(test)]
pub(crate) mod fuzz;
