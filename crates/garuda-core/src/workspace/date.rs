//! Today's date for the session-start context note: the user's local date, read once when a
//! session starts (and again at a compaction), never put in the system prompt, whose bytes
//! must not change with the day.

/// The line that opens the session-start context note.
const DATE_HEAD: &str = "Today's date: ";

/// The user's local date now, `YYYY-MM-DD` (the `TZ` variable and `/etc/localtime` decide;
/// UTC when the zone cannot be read).
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    local_date(secs)
}

/// The local date of a Unix time, `YYYY-MM-DD`.
pub fn local_date(unix_secs: i64) -> String {
    let t: libc::time_t = unix_secs as libc::time_t;
    // SAFETY: `tm` is a plain C struct for which all-zero bytes are a valid value, and
    // localtime_r only writes into it (it is the thread-safe form of localtime).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if ok {
        return format!(
            "{:04}-{:02}-{:02}",
            tm.tm_year as i64 + 1900,
            tm.tm_mon + 1,
            tm.tm_mday
        );
    }
    utc_date(unix_secs)
}

/// The UTC date of a Unix time.
fn utc_date(unix_secs: i64) -> String {
    let (y, m, d) = civil_date(unix_secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01 (Howard
/// Hinnant's algorithm), for dates without a time-zone database.
pub fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The session-start context note: the date, then the git state note's body when there is
/// one (pure).
pub fn start_note(date: &str, git: Option<&str>) -> String {
    let body = git
        .and_then(|g| g.strip_prefix("<garuda_note>"))
        .and_then(|g| g.strip_suffix("</garuda_note>"));
    match body {
        Some(b) => format!("<garuda_note>{DATE_HEAD}{date}.\n{b}</garuda_note>"),
        None => format!("<garuda_note>{DATE_HEAD}{date}.</garuda_note>"),
    }
}

/// The session-start note as a compaction re-installs it: the date line says today's date
/// when the day changed since the note was written (pure).
pub fn restate_date(note: &str, today: &str) -> String {
    let open = format!("<garuda_note>{DATE_HEAD}");
    let Some(rest) = note.strip_prefix(&open) else {
        return note.to_string();
    };
    let Some((date, after)) = rest.split_once('.') else {
        return note.to_string();
    };
    // The date is the first ten characters; a restated line names the start day after it.
    let stated = date.get(..10).unwrap_or(date);
    if stated == today {
        return note.to_string();
    }
    let started = date
        .split_once("(this session started on ")
        .and_then(|(_, s)| s.strip_suffix(')'))
        .unwrap_or(stated);
    format!("{open}{today} (this session started on {started}).{after}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_of_known_instants() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_083_200), "2026-12-01");
        assert_eq!(utc_date(-86_400), "1969-12-31");
    }

    #[test]
    fn the_start_note_puts_the_date_before_the_git_state() {
        let git = "<garuda_note>Git state of the workspace\nBranch: main\n</garuda_note>";
        assert_eq!(
            start_note("2026-12-01", Some(git)),
            "<garuda_note>Today's date: 2026-12-01.\nGit state of the workspace\nBranch: main\n</garuda_note>"
        );
        assert_eq!(
            start_note("2026-12-01", None),
            "<garuda_note>Today's date: 2026-12-01.</garuda_note>"
        );
    }

    #[test]
    fn a_new_day_is_stated_once_the_same_day_leaves_the_note_alone() {
        let note = start_note(
            "2026-12-01",
            Some("<garuda_note>Branch: main\n</garuda_note>"),
        );
        assert_eq!(restate_date(&note, "2026-12-01"), note);
        let next = restate_date(&note, "2026-12-02");
        assert!(
            next.starts_with(
                "<garuda_note>Today's date: 2026-12-02 (this session started on 2026-12-01).\nBranch: main"
            ),
            "{next}"
        );
        // Restating again keeps the start day and only the newest date.
        let later = restate_date(&next, "2026-12-03");
        assert!(later.contains("2026-12-03 (this session started on 2026-12-01)."));
        assert_eq!(restate_date(&next, "2026-12-02"), next);
        assert_eq!(
            restate_date("<garuda_note>Branch</garuda_note>", "x"),
            "<garuda_note>Branch</garuda_note>"
        );
    }
}
