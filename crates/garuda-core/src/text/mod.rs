//! Pure text helpers shared by every front.

pub mod format_chars;
pub use format_chars::{escape_format_chars, is_format_char};
