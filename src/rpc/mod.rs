//! rpc (skeleton).
