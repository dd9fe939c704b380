//! Pure text helpers shared by the engine and the fronts.

pub mod format_chars;

pub use format_chars::{escape_format_chars, is_format_char};
