//! Garuda: a context engine for coding agents.
//!
//! The library is the engine; it knows nothing of JSON-RPC. The `rpc` module is the
//! transport and `front` converts protocol messages into engine calls.

pub mod config;
pub mod engine;
pub mod front;
pub mod fsroot;
pub mod message;
pub mod prompt;
pub mod protocol;
pub mod provider;
pub mod rpc;
pub mod session;
pub mod tools;
pub mod turn;
pub mod workspace;
