//! Bounded listings of what a tool offers (the skills in `skill`'s description, the agents in
//! `agent`'s), pure, so the same entries and window always give the same request bytes.
//!
//! A folder of a cloned repository can hold any number of skills or agents; every request
//! carries the tool descriptions, so the list is capped as MCP deferral caps definitions
//! (`mcp::defer`): at most [`MAX_ENTRIES`] entries, each line at most [`MAX_ENTRY_CHARS`]
//! characters, and all of them within [`WINDOW_SHARE`] of the model's window (a token per 4
//! characters, the estimate the rest of Garuda uses). Entries are listed in their fixed order
//! until one does not fit; the rest are found by keyword search ([`search`]), the way
//! `mcp_tool_search` finds deferred tools.

use crate::message::estimate_tokens;

/// Most entries listed in one tool's description.
pub const MAX_ENTRIES: usize = 100;

/// Longest line of one entry (`- name: description`), in characters.
pub const MAX_ENTRY_CHARS: usize = 250;

/// The share of the model's window one tool's list may take.
pub const WINDOW_SHARE: f64 = 0.02;

/// Results a search returns.
pub const SEARCH_RESULTS: usize = 20;

/// Most names an error message lists (an unknown name's "the skills are: …").
pub const MAX_HINT_NAMES: usize = 30;

/// The lines of a listing and how many entries they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// One line per listed entry, each starting with a newline.
    pub text: String,
    /// Entries listed.
    pub listed: usize,
    /// Entries left out, found through the search.
    pub left_out: usize,
}

/// One entry's line, `\n- name: description`, cut to [`MAX_ENTRY_CHARS`].
pub fn entry_line(name: &str, description: &str) -> String {
    let line = format!("- {name}: {description}");
    if line.chars().nth(MAX_ENTRY_CHARS).is_none() {
        return format!("\n{line}");
    }
    let at = line
        .char_indices()
        .nth(MAX_ENTRY_CHARS - 1)
        .map_or(line.len(), |(at, _)| at);
    format!("\n{}…", &line[..at])
}

/// The listing of `entries` (name, description), in their order, for a model window of
/// `context_window` tokens.
pub fn fit<'a>(
    entries: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    context_window: u64,
) -> Listing {
    let total = entries.len();
    let budget = (context_window as f64 * WINDOW_SHARE) as u64;
    let mut out = Listing::default();
    let mut chars = 0usize;
    for (name, description) in entries.take(MAX_ENTRIES) {
        let line = entry_line(name, description);
        let with = chars + line.chars().count();
        if estimate_tokens(with) > budget {
            break;
        }
        chars = with;
        out.text.push_str(&line);
        out.listed += 1;
    }
    out.left_out = total - out.listed;
    out
}

/// The best `max` matches of `items` for keyword `query`: a term in the name counts 3, in
/// the description 1; ties go by name, so the answer is deterministic. `key` gives an
/// item's name and description.
pub fn search<'a, T>(
    items: &'a [T],
    key: impl Fn(&T) -> (&str, &str),
    query: &str,
    max: usize,
) -> Vec<&'a T> {
    let terms: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut scored: Vec<(u32, &str, &T)> = items
        .iter()
        .filter_map(|item| {
            let (name, description) = key(item);
            let lname = name.to_lowercase();
            let ldesc = description.to_lowercase();
            let score: u32 = terms
                .iter()
                .map(|t| {
                    3 * u32::from(lname.contains(t.as_str()))
                        + u32::from(ldesc.contains(t.as_str()))
                })
                .sum();
            (score > 0).then_some((score, name, item))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(max).map(|(_, _, i)| i).collect()
}

/// A search's answer for the model: the matches' lines, or that none matched. `what` is
/// the plural of what is listed ("skills").
pub fn search_text<'a>(
    what: &str,
    query: &str,
    all: usize,
    found: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
) -> String {
    if found.len() == 0 {
        return format!("No {what} match `{query}` ({all} in all).");
    }
    let mut out = format!("{} of {all} {what} match `{query}`:", found.len());
    for (name, description) in found {
        out.push_str(&entry_line(name, description));
    }
    out
}

impl Listing {
    /// The session-start warning when entries are left out: how many, of how many, and how
    /// the model finds them. `what` is the plural ("skills"), `tool` the tool's name.
    pub fn left_out_warning(&self, what: &str, tool: &str) -> Option<String> {
        (self.left_out > 0).then(|| {
            format!(
                "{} of {} {what} are not listed in the {tool} tool's description (it lists at \
                 most {MAX_ENTRIES}, each cut to {MAX_ENTRY_CHARS} characters, within {}% of \
                 the model's window); the model finds them with the tool's `query`",
                self.left_out,
                self.listed + self.left_out,
                WINDOW_SHARE * 100.0
            )
        })
    }
}

/// `names` for an error message: at most [`MAX_HINT_NAMES`], then how many more.
pub fn names_hint<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = names.len();
    let shown: Vec<&str> = names.take(MAX_HINT_NAMES).collect();
    let more = total - shown.len();
    if more == 0 {
        shown.join(", ")
    } else {
        format!("{} and {more} more (search with `query`)", shown.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize, description: &str) -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("skill-{i:05}"), description.to_string()))
            .collect()
    }

    fn fit_of(e: &[(String, String)], window: u64) -> Listing {
        fit(e.iter().map(|(n, d)| (n.as_str(), d.as_str())), window)
    }

    #[test]
    fn a_few_short_entries_are_all_listed() {
        let e = entries(3, "Does a thing.");
        let l = fit_of(&e, 200_000);
        assert_eq!((l.listed, l.left_out), (3, 0));
        assert_eq!(
            l.text,
            "\n- skill-00000: Does a thing.\n- skill-00001: Does a thing.\n- skill-00002: Does a thing."
        );
    }

    #[test]
    fn ten_thousand_entries_make_a_bounded_listing() {
        let e = entries(10_000, &"Long words. ".repeat(100));
        for window in [8_000, 200_000, 1_000_000, u64::MAX / 2] {
            let l = fit_of(&e, window);
            assert!(l.listed <= MAX_ENTRIES);
            assert_eq!(l.listed + l.left_out, 10_000);
            let chars = l.text.chars().count();
            assert!(chars <= MAX_ENTRIES * (MAX_ENTRY_CHARS + 1), "{chars}");
            assert!(estimate_tokens(chars) as f64 <= window as f64 * WINDOW_SHARE);
            for line in l.text.lines().skip(1) {
                assert!(line.chars().count() <= MAX_ENTRY_CHARS, "{line}");
                assert!(line.ends_with('…'));
            }
        }
        // A window too small for one line lists none; the search still finds them all.
        assert_eq!(fit_of(&e, 100).listed, 0);
        let l = fit_of(&e, 200_000);
        assert_eq!(
            l.left_out_warning("skills", "skill").unwrap(),
            format!(
                "{} of 10000 skills are not listed in the skill tool's description (it lists at \
                 most 100, each cut to 250 characters, within 2% of the model's window); the \
                 model finds them with the tool's `query`",
                10_000 - l.listed
            )
        );
        assert_eq!(
            fit_of(&e[..1], 200_000).left_out_warning("skills", "skill"),
            None
        );
    }

    #[test]
    fn search_ranks_names_over_descriptions_and_bounds_hints() {
        let items = [
            ("deploy", "Ships a release."),
            ("release-notes", "Writes notes."),
            ("lint", "Checks style."),
        ];
        let found = search(&items, |i| (i.0, i.1), "release", 5);
        let names: Vec<&str> = found.iter().map(|i| i.0).collect();
        assert_eq!(names, ["release-notes", "deploy"]);
        let text = search_text("skills", "release", 3, found.iter().map(|i| (i.0, i.1)));
        assert_eq!(
            text,
            "2 of 3 skills match `release`:\n- release-notes: Writes notes.\n- deploy: Ships a release."
        );
        assert_eq!(
            search_text("skills", "zzz", 3, std::iter::empty()),
            "No skills match `zzz` (3 in all)."
        );
        let many: Vec<String> = (0..40).map(|i| format!("n{i}")).collect();
        let hint = names_hint(many.iter().map(String::as_str));
        assert!(
            hint.ends_with("n29 and 10 more (search with `query`)"),
            "{hint}"
        );
        assert_eq!(names_hint(["a", "b"].into_iter()), "a, b");
    }
}
