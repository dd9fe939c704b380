//! Unicode format characters: invisible characters that change how the text around them is
//! shown (bidi overrides and isolates, zero-width characters, the byte-order mark) and the
//! line and paragraph separators. A name or a title holding one can read differently on a
//! screen from what it is (`safe\u{202e}elif_daer` shows as `saferead_file`), so what a person
//! is asked to trust shows them escaped, and names holding them are refused.

use std::borrow::Cow;

/// True for U+200B–U+200F, U+202A–U+202E, U+2066–U+2069, U+FEFF, U+2028 and U+2029.
pub fn is_format_char(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// `s` with every format character written as Rust writes it, `\u{202e}`; borrowed when
/// there is none (the common case costs no allocation).
pub fn escape_format_chars(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_format_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_format_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_ranges_and_nothing_else_are_format_characters() {
        let listed = [
            0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D,
            0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF,
        ];
        for cp in 0..=0x10FFFFu32 {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            assert_eq!(is_format_char(c), listed.contains(&cp), "U+{cp:04X}");
        }
    }

    #[test]
    fn escapes_only_format_characters_and_borrows_clean_text() {
        assert!(matches!(
            escape_format_chars("read_file ü 漢"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_format_chars("safe\u{202e}elif_daer"),
            "safe\\u{202e}elif_daer"
        );
        assert_eq!(
            escape_format_chars("\u{feff}a\u{200b}\u{2028}b\u{2069}"),
            "\\u{feff}a\\u{200b}\\u{2028}b\\u{2069}"
        );
        // The escaped text holds none, so escaping twice changes nothing.
        let once = escape_format_chars("x\u{202d}y").into_owned();
        assert_eq!(escape_format_chars(&once), once);
    }
}
