//! Unicode format characters a person cannot see: bidi overrides and isolates, zero-width
//! characters, the byte-order mark, and the line and paragraph separators. A title or
//! preview that holds one can read differently from what runs (`echo \u{202e}; hs.lave`
//! shows reversed), so what a person approves shows them escaped.

use std::borrow::Cow;

/// True for a character that changes how text around it is shown without being visible:
/// U+200B..=U+200F, U+202A..=U+202E, U+2066..=U+2069, U+FEFF, U+2028 and U+2029.
pub fn is_format_char(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// `s` with every format character written as `\u{202e}` (lowercase hex, as `{:x}` prints
/// it); borrowed when there is none, so the common case costs no allocation.
pub fn escape_format_chars(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_format_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_format_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
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
    fn every_listed_char_is_a_format_char() {
        let listed = (0x200b..=0x200f)
            .chain(0x202a..=0x202e)
            .chain(0x2066..=0x2069)
            .chain([0xfeff, 0x2028, 0x2029]);
        for cp in listed {
            let c = char::from_u32(cp).unwrap();
            assert!(is_format_char(c), "U+{cp:04X}");
        }
    }

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
    fn neighbours_and_plain_text_are_not() {
        for c in [
            'a', ' ', '\n', '\u{200a}', '\u{2010}', '\u{2027}', '\u{202f}', '\u{2065}', '\u{206a}',
            '\u{fefe}', 'é', '日',
        ] {
            assert!(!is_format_char(c), "{c:?}");
        }
    }

    #[test]
    fn escapes_the_reversed_command() {
        let s = "bash: echo \u{202e}; hs.lave | lruc ; ls";
        assert_eq!(
            escape_format_chars(s),
            "bash: echo \\u{202e}; hs.lave | lruc ; ls"
        );
    }

    #[test]
    fn escapes_each_kind_in_lowercase_hex() {
        assert_eq!(
            escape_format_chars("a\u{200b}b\u{2066}c\u{feff}d\u{2028}e\u{2029}f\u{200F}"),
            "a\\u{200b}b\\u{2066}c\\u{feff}d\\u{2028}e\\u{2029}f\\u{200f}"
        );
    }

    #[test]
    fn plain_text_is_borrowed() {
        let s = "cargo test -- --nocapture 日本";
        assert!(matches!(escape_format_chars(s), Cow::Borrowed(_)));
        assert!(matches!(escape_format_chars(""), Cow::Borrowed(_)));
    }

    #[test]
    fn escaping_twice_changes_nothing_more() {
        let once = escape_format_chars("safe\u{202e}elif_daer").into_owned();
        assert_eq!(once, "safe\\u{202e}elif_daer");
        assert!(matches!(escape_format_chars(&once), Cow::Borrowed(_)));
    }
}
