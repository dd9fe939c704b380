//! `file://` URIs from LSP clients to paths.

use std::path::PathBuf;

/// A `file://` URI (percent-decoded) or a plain path, as a path; other schemes are `None`.
pub fn uri_to_path(s: &str) -> Option<PathBuf> {
    let Some(rest) = s.strip_prefix("file://") else {
        return if s.contains("://") {
            None
        } else {
            Some(PathBuf::from(s))
        };
    };
    // file://host/path: only an empty host or localhost name this machine.
    let path = match rest.find('/') {
        Some(0) => rest,
        Some(i) if &rest[..i] == "localhost" => &rest[i..],
        _ => return None,
    };
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_file_uris() {
        assert_eq!(
            uri_to_path("file:///tmp/a%20b"),
            Some(PathBuf::from("/tmp/a b"))
        );
        assert_eq!(uri_to_path("file://localhost/x"), Some(PathBuf::from("/x")));
        assert_eq!(
            uri_to_path("/plain/path"),
            Some(PathBuf::from("/plain/path"))
        );
        assert_eq!(uri_to_path("https://example.invalid/x"), None);
        assert_eq!(uri_to_path("file://otherhost/x"), None);
        assert_eq!(
            uri_to_path("file:///bad%zz"),
            Some(PathBuf::from("/bad%zz"))
        );
    }
}
