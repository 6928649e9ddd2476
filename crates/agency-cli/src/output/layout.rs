//! How wide the CLI's tables may be, and how ids and times are shown in
//! them: listings fit the terminal (100 columns when stdout is not one),
//! show each id by a short prefix that every command accepts back, long
//! cells cut with `…`, times relative to now ("3m ago"). `--wide` (or
//! `AGENCY_WIDE=1`) shows everything whole: full ids, uncut cells, RFC 3339
//! times. `--json` is never affected.
//!
//! The layout is set once per process, from the command line, before any
//! output ([`set`]); code that renders without it (unit tests) gets the
//! default: 100 columns, not wide.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use agency_core::Timestamp;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The width when stdout is not a terminal and `COLUMNS` is not set.
pub const DEFAULT_WIDTH: usize = 100;

/// The fewest hex digits an id is shown with. 8 hex digits are 32 random
/// bits (ids are UUID v4): two ids of one home share them with odds of
/// about n²/2³³, so a printed prefix resolves to its id in practice; when
/// two ids shown together do share them, both are shown longer, and a
/// prefix that does not resolve uniquely is refused by name, never guessed.
pub const MIN_ID_DIGITS: usize = 8;

/// The fewest columns a cut column keeps (a cell cut shorter says nothing).
const MIN_CUT: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The widest a line of a table may be.
    pub width: usize,
    /// Everything whole: full ids, uncut cells, absolute times.
    pub wide: bool,
    /// "Now" for relative times (one instant for the whole output).
    pub now: Timestamp,
}

static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// Fix the layout for this process (first call wins).
pub fn set(wide: bool) {
    let _ = LAYOUT.set(Layout {
        width: terminal_width(),
        wide,
        now: now(),
    });
}

/// The layout set for this process, or the default.
pub fn get() -> Layout {
    LAYOUT.get().copied().unwrap_or(Layout {
        width: DEFAULT_WIDTH,
        wide: false,
        now: now(),
    })
}

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Timestamp(ms)
}

/// `COLUMNS` when set to a sensible number, else the terminal's width when
/// stdout is a terminal, else [`DEFAULT_WIDTH`] (a pipe or a file).
fn terminal_width() -> usize {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| (20..=10_000).contains(c))
    {
        return c;
    }
    let t = comfy_table::Table::new();
    if t.is_tty()
        && let Some(w) = t.width().filter(|w| *w >= 20)
    {
        return usize::from(w);
    }
    DEFAULT_WIDTH
}

/// The display width of a cell (wide characters count two).
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` cut to at most `max` columns, ending in `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// A time for a listing: "3m ago" (or the RFC 3339 time with `--wide`).
pub fn ago(t: Timestamp) -> String {
    ago_in(&get(), t)
}

pub fn ago_in(l: &Layout, t: Timestamp) -> String {
    if l.wide {
        return t.to_string();
    }
    let ms = l.now.0.saturating_sub(t.0);
    let (future, s) = (ms < 0, ms.unsigned_abs() / 1000);
    let amount = match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        86_400..2_592_000 => format!("{}d", s / 86_400),
        // Past a month the day itself says more than a count of days.
        _ => return t.to_rfc3339().get(..10).unwrap_or_default().to_owned(),
    };
    if future {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// A long line of free-form text (not a table) broken so that no line is
/// wider than the layout's width: at `; `, then at `, `, then anywhere;
/// continuation lines are indented by `indent` + 4. Nothing is cut; with
/// `--wide` the line is left whole. `line` has no newline; the result ends
/// in one.
pub fn wrap(line: &str, indent: usize) -> String {
    wrap_in(&get(), line, indent)
}

pub fn wrap_in(l: &Layout, line: &str, indent: usize) -> String {
    let max = l.width;
    if l.wide || width(line) <= max {
        return format!("{line}\n");
    }
    let cont = " ".repeat(indent + 4);
    let room = max.saturating_sub(cont.len()).max(10);
    // Pieces ending in their separator, so that joining them is the line.
    let mut pieces = Vec::new();
    for part in line.split_inclusive("; ") {
        if width(part) <= room {
            pieces.push(part.to_owned());
            continue;
        }
        for sub in part.split_inclusive(", ") {
            let mut rest = sub;
            while width(rest) > room {
                let mut end = 0;
                let mut used = 0;
                for (i, c) in rest.char_indices() {
                    let w = c.width().unwrap_or(0);
                    if used + w > room {
                        break;
                    }
                    used += w;
                    end = i + c.len_utf8();
                }
                pieces.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
            pieces.push(rest.to_owned());
        }
    }
    let mut out = String::new();
    let mut cur = String::new();
    for p in pieces {
        if !cur.is_empty() && width(&cur) + width(p.trim_end()) > max {
            out.push_str(cur.trim_end());
            out.push('\n');
            cur = String::new();
        }
        if cur.is_empty() && !out.is_empty() {
            cur.push_str(&cont);
            cur.push_str(p.trim_start());
        } else {
            cur.push_str(&p);
        }
    }
    out.push_str(cur.trim_end());
    out.push('\n');
    out
}

/// Prose (a note, a warning) re-flowed to the layout's width: each
/// paragraph's lines joined and broken at spaces (a word wider than the
/// width, a long path, keeps its own line). Unchanged with `--wide`.
pub fn prose(text: &str) -> String {
    let l = get();
    if l.wide {
        return text.to_owned();
    }
    let mut out = String::new();
    for (i, para) in text.split("\n\n").enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && width(&line) + 1 + width(word) > l.width {
                out.push_str(&line);
                out.push('\n');
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// `line` broken at spaces into lines of at most `max` columns, each
/// continuation with the line's own leading whitespace; a word wider than
/// that keeps a line of its own. Nothing is dropped but the spaces broken at.
pub fn break_at_spaces(line: &str, max: usize) -> Vec<String> {
    if width(line) <= max {
        return vec![line.to_owned()];
    }
    let lead: String = line.chars().take_while(|c| *c == ' ').collect();
    let mut out = Vec::new();
    let mut cur = lead.clone();
    for word in line[lead.len()..].split(' ') {
        let fresh = cur.len() == lead.len();
        if !fresh && width(&cur) + 1 + width(word) > max {
            out.push(std::mem::replace(&mut cur, lead.clone()));
        }
        if cur.len() != lead.len() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push(cur);
    out
}

/// Whether `s[i..i + 36]` is a hyphenated UUID not inside a longer run of
/// hex digits.
fn uuid_at(b: &[u8], i: usize) -> bool {
    let Some(w) = b.get(i..i + 36) else {
        return false;
    };
    let shape = w.iter().enumerate().all(|(k, c)| match k {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    });
    let before = i.checked_sub(1).and_then(|j| b.get(j));
    let after = b.get(i + 36);
    shape
        && !before.is_some_and(|c| c.is_ascii_hexdigit() || *c == b'-')
        && !after.is_some_and(|c| c.is_ascii_hexdigit() || *c == b'-')
}

/// Every UUID in `s`, lowercased.
fn uuids_in(s: &str, out: &mut BTreeSet<String>) {
    let b = s.as_bytes();
    let mut i = 0;
    while i + 36 <= b.len() {
        if uuid_at(b, i) {
            out.insert(s[i..i + 36].to_ascii_lowercase());
            i += 36;
        } else {
            i += 1;
        }
    }
}

/// Each UUID of `ids` (sorted) with the length of its shortest prefix that
/// no other id of the set shares, at least [`MIN_ID_DIGITS`] and never
/// ending on a `-`.
fn prefix_lengths(ids: &BTreeSet<String>) -> Vec<(String, usize)> {
    let list: Vec<&String> = ids.iter().collect();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    list.iter()
        .enumerate()
        .map(|(i, id)| {
            let prev = i.checked_sub(1).map_or(0, |j| common(id, list[j]));
            let next = list.get(i + 1).map_or(0, |n| common(id, n));
            let mut len = (prev.max(next) + 1).clamp(MIN_ID_DIGITS, 36);
            if id.as_bytes().get(len - 1) == Some(&b'-') {
                len += 1;
            }
            ((*id).clone(), len.min(36))
        })
        .collect()
}

/// Replace every UUID in the cells by its shortest unique prefix among
/// the UUIDs of all the cells.
pub fn shorten_ids(rows: &mut [Vec<String>]) {
    let mut ids = BTreeSet::new();
    for cell in rows.iter().flatten() {
        uuids_in(cell, &mut ids);
    }
    if ids.is_empty() {
        return;
    }
    let lengths: std::collections::BTreeMap<String, usize> =
        prefix_lengths(&ids).into_iter().collect();
    for cell in rows.iter_mut().flatten() {
        let b = cell.as_bytes();
        let mut out = String::with_capacity(cell.len());
        let (mut i, mut last) = (0, 0);
        while i + 36 <= b.len() {
            if uuid_at(b, i) {
                let id = cell[i..i + 36].to_ascii_lowercase();
                let n = lengths.get(&id).copied().unwrap_or(36);
                out.push_str(&cell[last..i]);
                out.push_str(&cell[i..i + n]);
                i += 36;
                last = i;
            } else {
                i += 1;
            }
        }
        out.push_str(&cell[last..]);
        *cell = out;
    }
}

/// The width of each column so that a line fits `max` columns (columns two
/// apart): the widest columns are narrowed first, down to what their
/// header needs (at least a few columns); columns listed in `keep` (ids,
/// tree drawings) are never narrowed. `None` when everything fits.
pub fn fit(natural: &[usize], floors: &[usize], keep: &[bool], max: usize) -> Option<Vec<usize>> {
    let sep = 2 * natural.len().saturating_sub(1);
    let total = |ws: &[usize]| ws.iter().sum::<usize>() + sep;
    if total(natural) <= max {
        return None;
    }
    let at = |cap: usize| -> Vec<usize> {
        natural
            .iter()
            .zip(floors)
            .zip(keep)
            .map(|((n, f), k)| if *k { *n } else { (*n).min(cap.max(*f)) })
            .collect()
    };
    let widest = natural.iter().copied().max().unwrap_or(0);
    // The largest cap that fits (binary search: total grows with the cap).
    let (mut lo, mut hi) = (0, widest);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if total(&at(mid)) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut ws = at(lo);
    // Columns cut at the cap share what is left over, left to right.
    let mut spare = max.saturating_sub(total(&ws));
    for (i, w) in ws.iter_mut().enumerate() {
        if spare == 0 {
            break;
        }
        if !keep[i] && *w < natural[i] {
            let more = (natural[i] - *w).min(spare);
            *w += more;
            spare -= more;
        }
    }
    Some(ws)
}

/// The narrowest a column may be cut to: its header, or [`MIN_CUT`].
pub fn floor(header: &str, natural: usize) -> usize {
    natural.min(width(header).max(MIN_CUT))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_shortened_to_unique_prefixes_of_at_least_eight_digits() {
        let mut rows = vec![
            vec!["├── 1234abcd-0000-4000-8000-000000000001".to_owned()],
            vec!["handler 1234abce-0000-4000-8000-000000000002 (agent 99999999-1111-4000-8000-000000000003)".to_owned()],
            vec!["1234abcd-0000-4000-8000-000000000009".to_owned()],
            vec!["not an id: 1234abcd-0000-4000-8000-00000000000f1".to_owned()],
        ];
        shorten_ids(&mut rows);
        assert_eq!(rows[0][0], "├── 1234abcd-0000-4000-8000-000000000001");
        assert_eq!(rows[1][0], "handler 1234abce (agent 99999999)");
        assert_eq!(rows[2][0], "1234abcd-0000-4000-8000-000000000009");
        assert_eq!(
            rows[3][0],
            "not an id: 1234abcd-0000-4000-8000-00000000000f1"
        );
        // Prefixes never end on a hyphen.
        let mut rows = vec![
            vec!["aaaaaaaa-0000-4000-8000-000000000001".to_owned()],
            vec!["aaaaaaaa-1000-4000-8000-000000000001".to_owned()],
        ];
        shorten_ids(&mut rows);
        assert_eq!(rows[0][0], "aaaaaaaa-0");
        assert_eq!(rows[1][0], "aaaaaaaa-1");
    }

    #[test]
    fn the_widest_columns_are_cut_first_and_kept_columns_never() {
        // 8 + 30 + 80 + 2 * 2 = 122 > 100.
        let ws = fit(&[8, 30, 80], &[6, 6, 6], &[true, false, false], 100).unwrap();
        assert_eq!(ws.iter().sum::<usize>() + 4, 100, "{ws:?}");
        assert_eq!(ws[0], 8);
        assert_eq!(ws, vec![8, 30, 58]);
        let ws = fit(&[8, 70, 80], &[6, 6, 6], &[true, false, false], 100).unwrap();
        assert_eq!(ws, vec![8, 44, 44]);
        assert_eq!(fit(&[8, 10], &[6, 6], &[false, false], 100), None);
    }

    #[test]
    fn cells_are_cut_with_an_ellipsis_within_their_width() {
        assert_eq!(cut("abcdef", 6), "abcdef");
        assert_eq!(cut("abcdefg", 6), "abcde…");
        assert_eq!(width(&cut("日本語のタイトル", 7)), 7);
    }

    #[test]
    fn long_lines_wrap_at_separators_without_losing_anything() {
        let l = Layout {
            width: 40,
            wide: false,
            now: Timestamp(0),
        };
        let line = "abcd1234 (active) spent: 10 tokens, $0.5, 3 calls; limit: 100 tokens, $1; PAUSED: budget";
        let out = wrap_in(&l, line, 2);
        assert!(out.lines().all(|x| width(x) <= 40), "{out}");
        assert_eq!(
            out,
            "abcd1234 (active) spent: 10 tokens,\n      $0.5, 3 calls;\n      limit: 100 tokens, $1;\n      PAUSED: budget\n"
        );
        let squeezed: String = out.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        assert_eq!(squeezed.replace("  ", " "), line.replace("  ", " "));
        let json = format!("args: {}", "x".repeat(100));
        let out = wrap_in(&l, &json, 0);
        assert!(out.lines().all(|x| width(x) <= 40), "{out}");
        assert_eq!(out.replace(['\n', ' '], ""), json.replace(' ', ""));
        assert_eq!(
            wrap_in(&Layout { wide: true, ..l }, line, 2),
            format!("{line}\n")
        );
    }

    #[test]
    fn long_lines_break_at_spaces_keeping_their_indentation() {
        let parts = break_at_spaces(
            "    \"command\": \"rm -rf /tmp/a-very-long-path\" and more words here",
            30,
        );
        assert_eq!(
            parts,
            [
                "    \"command\": \"rm -rf",
                "    /tmp/a-very-long-path\" and",
                "    more words here"
            ]
        );
        assert!(parts.iter().all(|p| width(p) <= 30));
        assert_eq!(break_at_spaces("short", 30), ["short"]);
    }

    #[test]
    fn times_are_relative_unless_wide() {
        let l = Layout {
            width: 100,
            wide: false,
            now: Timestamp(1_000_000_000_000),
        };
        let before = |ms: i64| ago_in(&l, Timestamp(l.now.0 - ms));
        assert_eq!(before(4_000), "4s ago");
        assert_eq!(before(185_000), "3m ago");
        assert_eq!(before(7_200_000), "2h ago");
        assert_eq!(before(3 * 86_400_000), "3d ago");
        assert_eq!(before(-60_000), "in 1m");
        assert_eq!(before(90 * 86_400_000), "2001-06-11");
        let wide = Layout { wide: true, ..l };
        assert_eq!(ago_in(&wide, l.now), l.now.to_string());
    }
}
