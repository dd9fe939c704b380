//! Where Garuda keeps its own files on this machine, from the XDG variables: a leaf, so the
//! sandbox probe (which caches its answer) and the config need not import each other.

use std::path::PathBuf;

/// The state directory: `$XDG_STATE_HOME/garuda` (or `~/.local/state/garuda`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state")))
        .unwrap_or_else(std::env::temp_dir)
        .join("garuda")
}

/// Where Garuda keeps what it can recompute (the sandbox probe's answer):
/// `$XDG_CACHE_HOME/garuda`, else `~/.cache/garuda`.
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("garuda"))
}
