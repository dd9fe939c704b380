//! The `garuda` binary's library half: the JSON-RPC transport (`rpc`) and the fronts that
//! convert protocol messages into engine calls (`front`). The engine is `garuda_core`; the
//! wire types are `garuda_protocol`.

pub mod front;
pub mod rpc;

#[cfg(test)]
pub(crate) mod fuzz;
