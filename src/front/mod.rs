//! Fronts: convert protocol messages into engine calls and engine results into answers.

pub mod acp;
pub mod errors;
pub mod exec;
mod host;
pub mod native;
mod params;
mod uri;
pub mod wire;

pub use host::{RpcHost, acp_permission_answer, permission_answer};
pub use params::parse_params;
pub use uri::uri_to_path;
