//! Garuda's integration tests: one binary that spawns the real `garuda` and speaks its protocols.

mod acp;
mod cli;
mod client;
mod context;
mod long_session;
mod mock_model;
mod mock_smoke;
mod server;
mod sim_provider;
mod turns;
