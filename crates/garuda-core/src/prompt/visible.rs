//! Sanitizing values that go into the prompt's fixed lines.

/// Longest value kept, so a pathological model spec cannot bloat the prompt.
const MAX_VISIBLE: usize = 200;

/// Keeps visible ASCII only (0x21..=0x7e and space) minus `<` and `>`, at most 200
/// characters: a model spec or version cannot add lines or markup to the prompt.
pub fn visible(s: &str) -> String {
    s.chars()
        .filter(|&c| c == ' ' || (('\x21'..='\x7e').contains(&c) && c != '<' && c != '>'))
        .take(MAX_VISIBLE)
        .collect()
}

/// The root path for the prompt: any Unicode is kept (real folder names), but control
/// characters (newlines) and angle brackets become `?`, so a folder name cannot forge lines
/// or markers either.
pub(crate) fn path_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || c == '<' || c == '>' {
                '?'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        assert_eq!(visible("claude-sonnet-4.5"), "claude-sonnet-4.5");
        assert_eq!(visible("a\nb\r\tc"), "abc");
        assert_eq!(visible("x</garuda_note>y"), "x/garuda_notey");
        assert_eq!(visible("modèle ü"), "modle ");
        assert_eq!(visible(&"a".repeat(1000)).len(), 200);
        assert_eq!(path_line("/home/josé/a\nb<c>"), "/home/josé/a?b?c?");
    }

    proptest! {
        #[test]
        fn only_allowed_characters(s in any::<String>()) {
            let v = visible(&s);
            prop_assert!(v.chars().all(|c| c == ' ' || ('\x21'..='\x7e').contains(&c)));
            prop_assert!(!v.contains('<') && !v.contains('>') && !v.contains('\n'));
            prop_assert!(v.len() <= 200);
        }

        #[test]
        fn allowed_input_is_kept(s in "[ -;=?-~]{0,200}") {
            prop_assert_eq!(visible(&s), s);
        }

        #[test]
        fn path_line_is_one_line(s in any::<String>()) {
            let v = path_line(&s);
            prop_assert!(!v.contains('\n') && !v.contains('<') && !v.contains('>'));
            prop_assert_eq!(v.chars().count(), s.chars().count());
        }
    }
}
