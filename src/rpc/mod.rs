//! The JSON-RPC 2.0 transport over a byte stream (stdio), knowing nothing of Garuda's methods.
//!
//! - [`framing`]: LSP `Content-Length:` headers or newline-delimited JSON, detected from the
//!   first non-whitespace byte (a letter starts a header; anything else is a JSON line);
//!   answers use the detected framing. Frames over the size limit are skipped as they stream
//!   past, never buffered whole.
//! - [`message`]: one frame to one [`Incoming`]; outgoing messages always carry
//!   `"jsonrpc":"2.0"`. Batch arrays are not supported: they are answered with -32600.
//! - [`error`]: [`RpcError`] and the error [`codes`].
//! - [`server`]: [`serve`] drives a [`Handler`]: inline or spawned requests, `$/cancelRequest`,
//!   server-to-client requests through [`Client`], ordered output, quick and long lanes with
//!   their own running limits and a bounded wait queue (refusal only when it is full).
//!
//! See `protocol/TRANSPORT.md` for the wire-level contract.

#![warn(missing_docs)]

pub mod error;
pub mod framing;
pub mod message;
pub mod server;

pub use error::{RpcError, codes};
pub use framing::{Framing, encode};
pub use message::{Id, Incoming};
pub use server::{
    Client, Dispatch, Flow, Handler, RequestCtx, ServeEnd, ServerConfig, Then, cancellable, serve,
};
