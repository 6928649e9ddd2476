//! The report: sections of rows (measure, value, baseline, ratio) and the
//! Markdown of `BENCHMARKS.md` with how to rerun and what machine ran it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;

use crate::Cfg;
use crate::util::{command_line, fmt_dur};

/// One line of a table.
#[derive(Debug, Clone)]
pub struct Row {
    pub measure: String,
    pub value: String,
    pub baseline: String,
    pub ratio: String,
}

impl Row {
    /// A timed measure against a timed baseline; the ratio is value / baseline.
    pub fn times(measure: impl Into<String>, value: Duration, baseline: (&str, Duration)) -> Row {
        Row {
            measure: measure.into(),
            value: fmt_dur(value),
            baseline: format!("{} ({})", fmt_dur(baseline.1), baseline.0),
            ratio: ratio(value.as_secs_f64(), baseline.1.as_secs_f64()),
        }
    }

    /// Free-form cells with a numeric ratio.
    pub fn new(
        measure: impl Into<String>,
        value: impl Into<String>,
        baseline: impl Into<String>,
        ratio: impl Into<String>,
    ) -> Row {
        Row {
            measure: measure.into(),
            value: value.into(),
            baseline: baseline.into(),
            ratio: ratio.into(),
        }
    }
}

/// `a / b` as "×1.23" (or "n/a" when b is zero).
pub fn ratio(a: f64, b: f64) -> String {
    if b <= 0.0 || !a.is_finite() || !b.is_finite() {
        return "n/a".to_owned();
    }
    let r = a / b;
    if r >= 100.0 {
        format!("×{r:.0}")
    } else if r >= 10.0 {
        format!("×{r:.1}")
    } else {
        format!("×{r:.2}")
    }
}

/// One benchmark item's table.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub title: String,
    pub rows: Vec<Row>,
    /// One line: what the numbers show.
    pub shows: String,
    /// How it was measured, sizes, caveats.
    pub notes: Vec<String>,
    /// Set when the item could not run: the reason.
    pub not_measured: Option<String>,
    pub took: Option<Duration>,
    /// The section as an earlier report wrote it (heading included), kept
    /// as is when this run (`--only`) did not measure its item.
    pub kept: Option<String>,
}

impl Section {
    pub fn new(title: impl Into<String>) -> Section {
        Section {
            title: title.into(),
            ..Section::default()
        }
    }

    pub fn not_measured(title: &str, reason: &str) -> Section {
        Section {
            title: title.to_owned(),
            not_measured: Some(reason.to_owned()),
            ..Section::default()
        }
    }
}

/// An RFC 3339 time to the second (`2026-12-06T08:45:56.28Z` →
/// `2026-12-06T08:45:56Z`); anything else as it is.
fn to_second(t: &str) -> String {
    match (t.get(..19), t.get(19..20)) {
        (Some(head), Some(".")) if t.ends_with('Z') => format!("{head}Z"),
        _ => t.to_owned(),
    }
}

/// How the header line of a run with `--only` begins.
const KEPT_LINE: &str = "- this run measured items ";
/// How a section's last line begins, and what in it says when it was
/// measured.
const TOOK_LINE: &str = "- this item took ";
const MEASURED: &str = "(measured ";

/// What an earlier report holds for the items this run leaves out.
#[derive(Debug, Clone, Default)]
pub struct Earlier {
    /// Its `- mode:` and `- date:` lines' values.
    pub mode: String,
    pub date: String,
    /// Its own line about sections it kept from a report before it.
    pub kept_line: Option<String>,
    /// Its sections by item number (`## 5b.` belongs to item 5), each the
    /// text from its heading to the next, in order.
    pub sections: Vec<(u8, String)>,
    /// When its items were measured, for sections that do not say so
    /// themselves (written before they did): see [`measured_dates`].
    measured: BTreeMap<u8, String>,
    /// When the items `measured` does not name were.
    measured_else: String,
}

/// When each item of a report dated `date` was measured, from its `--only`
/// line: that names the items the run measured and, in the format before
/// sections carried their date, quoted the same line of the report it kept
/// the others from, with that report's date, and so on back to a run that
/// measured everything. Returns the items named along that chain with
/// their dates, and the date of the last report (the other items').
fn measured_dates(date: &str, kept_line: Option<&str>) -> (BTreeMap<u8, String>, String) {
    const ITEMS: &str = "this run measured items ";
    let day = |d: &str| to_second(d.split([';', ')']).next().unwrap_or("").trim());
    let mut dates = BTreeMap::new();
    let mut date = day(date);
    let mut line = kept_line.unwrap_or("");
    while let Some(rest) = line.find(ITEMS).map(|i| &line[i + ITEMS.len()..]) {
        let items = rest.split(" only").next().unwrap_or("");
        for n in items.split(',').filter_map(|n| n.trim().parse::<u8>().ok()) {
            dates.entry(n).or_insert_with(|| date.clone());
        }
        match rest.find("; date: ") {
            Some(i) => date = day(&rest[i + "; date: ".len()..]),
            None => break,
        }
        line = match rest.find("which said in turn: \"") {
            Some(i) => &rest[i..],
            None => "",
        };
    }
    (dates, date)
}

impl Earlier {
    /// Parse a report this program wrote.
    pub fn parse(text: &str) -> Earlier {
        let mut e = Earlier::default();
        let mut current: Option<(u8, String)> = None;
        for line in text.split_inclusive('\n') {
            if let Some(head) = line.strip_prefix("## ") {
                e.sections.extend(current.take());
                let digits: String = head.chars().take_while(char::is_ascii_digit).collect();
                current = digits.parse().ok().map(|n| (n, String::new()));
            } else if current.is_none() {
                if let Some(v) = line.strip_prefix("- mode: ") {
                    e.mode = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("- date: ") {
                    e.date = v.trim().to_owned();
                } else if line.starts_with(KEPT_LINE) {
                    e.kept_line = Some(line.trim_start_matches("- ").trim().to_owned());
                }
            }
            if let Some((_, body)) = current.as_mut() {
                body.push_str(line);
            }
        }
        e.sections.extend(current);
        (e.measured, e.measured_else) = measured_dates(&e.date, e.kept_line.as_deref());
        e
    }

    /// The kept text of item `n`'s sections, if the earlier report has any,
    /// its "this item took" line saying when it was measured.
    pub fn item(&self, n: u8) -> Option<String> {
        let when = self.measured.get(&n).unwrap_or(&self.measured_else);
        let text: String = self
            .sections
            .iter()
            .filter(|(m, _)| *m == n)
            .flat_map(|(_, t)| t.split_inclusive('\n'))
            .map(|l| match l.strip_prefix(TOOK_LINE) {
                Some(rest) if !rest.contains(MEASURED) => {
                    format!("{TOOK_LINE}{} {MEASURED}{when})\n", rest.trim_end())
                }
                _ => l.to_owned(),
            })
            .collect();
        (!text.is_empty()).then_some(text)
    }
}

/// Escape a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The whole `BENCHMARKS.md`.
/// `only`: the items this run measured when it was told (`--only`), and
/// `earlier` the report whose other sections it keeps.
pub fn render(
    sections: &[Section],
    cfg: Cfg,
    took: Duration,
    only: &[u8],
    earlier: Option<&Earlier>,
) -> Result<String> {
    let mut md = String::new();
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "unknown".to_owned());
    writeln!(md, "# Benchmarks")?;
    writeln!(md)?;
    writeln!(
        md,
        "Written by `agency-bench` (crate `crates/agency-bench`); do not edit by hand. Rerun with:"
    )?;
    writeln!(md)?;
    writeln!(md, "```sh")?;
    writeln!(
        md,
        "cargo run --release -p agency-bench -- --out BENCHMARKS.md            # full (1,000,000 outcomes, 100,000 handlers)"
    )?;
    writeln!(
        md,
        "cargo run --release -p agency-bench -- --quick --out BENCHMARKS.md    # about a tenth of the sizes"
    )?;
    writeln!(md, "```")?;
    writeln!(md)?;
    writeln!(
        md,
        "Every figure stands next to a baseline measured **in the same run** on the same machine, and the ratio between them is the number to compare across machines: absolute times on a shared, noisy machine mean little. Nothing here is a test assertion."
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "- mode: **{}**",
        if cfg.quick {
            "quick (`--quick`: reduced sizes and sample counts, stated per item)"
        } else {
            "full"
        }
    )?;
    writeln!(
        md,
        "- date: {now}; whole run took {:.0} s",
        took.as_secs_f64()
    )?;
    writeln!(md, "- nproc: {}", command_line("nproc", &[]))?;
    writeln!(md, "- kernel: {}", command_line("uname", &["-sr"]))?;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    writeln!(md, "- cpu: {cpu}")?;
    writeln!(md, "- rustc: {}", command_line("rustc", &["--version"]))?;
    writeln!(md, "- build: release profile of this workspace")?;
    if let Some(e) = earlier.filter(|_| !only.is_empty()) {
        let items: Vec<String> = only.iter().map(u8::to_string).collect();
        writeln!(
            md,
            "{KEPT_LINE}{} only (`--only`); the other sections are copied unchanged from the report that was at this path before (mode: {}), each saying when it was measured",
            items.join(", "),
            e.mode,
        )?;
    }
    writeln!(md)?;
    for s in sections {
        if let Some(text) = &s.kept {
            md.push_str(text);
            if !text.ends_with("\n\n") {
                writeln!(md)?;
            }
            continue;
        }
        writeln!(md, "## {}", s.title)?;
        writeln!(md)?;
        if let Some(reason) = &s.not_measured {
            writeln!(md, "Not measured: {reason}")?;
            writeln!(md)?;
            continue;
        }
        if !s.rows.is_empty() {
            writeln!(md, "| measure | value | baseline | ratio |")?;
            writeln!(md, "|---|---:|---:|---:|")?;
            for r in &s.rows {
                writeln!(
                    md,
                    "| {} | {} | {} | {} |",
                    cell(&r.measure),
                    cell(&r.value),
                    cell(&r.baseline),
                    cell(&r.ratio)
                )?;
            }
            writeln!(md)?;
        }
        if !s.shows.is_empty() {
            writeln!(md, "**What this shows:** {}", s.shows)?;
            writeln!(md)?;
        }
        for n in &s.notes {
            writeln!(md, "- {n}")?;
        }
        if let Some(t) = s.took {
            writeln!(
                md,
                "{TOOK_LINE}{:.0} s {MEASURED}{})",
                t.as_secs_f64(),
                to_second(&now)
            )?;
        }
        if !s.notes.is_empty() || s.took.is_some() {
            writeln!(md)?;
        }
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report in the format before sections carried their dates: its
    /// `--only` line quotes the line of the report before it.
    const OLD: &str = "# Benchmarks\n\n- mode: **full**\n- date: 2026-12-06T08:45:56.281Z; whole run took 195 s\n- this run measured items 6, 16 only (`--only`); the other sections are copied unchanged from the report that was at this path before (mode: **full**; date: 2026-12-06T08:27:27.564Z; whole run took 179 s), which said in turn: \"this run measured items 3, 6 only (`--only`); the other sections are copied unchanged from the report that was at this path before (mode: **full**; date: 2026-12-03T09:34:40.654Z; whole run took 974 s)\"\n\n## 3. Writes\n\n- this item took 85 s\n\n## 5. Scale\n\n- this item took 9 s\n\n## 5b. Pages\n\n- this item took 2 s\n\n## 6. Agents\n\n- this item took 69 s\n";

    #[test]
    fn the_items_of_an_old_report_get_the_date_of_the_run_that_measured_them() {
        let e = Earlier::parse(OLD);
        let took = |n| e.item(n).unwrap();
        assert!(took(6).contains("- this item took 69 s (measured 2026-12-06T08:45:56Z)\n"));
        assert!(took(3).contains("- this item took 85 s (measured 2026-12-06T08:27:27Z)\n"));
        // Measured by the run at the end of the chain; both sections of the item.
        assert_eq!(
            took(5).matches("(measured 2026-12-03T09:34:40Z)").count(),
            2,
            "{}",
            took(5)
        );
        assert!(e.item(7).is_none());
    }

    #[test]
    fn a_section_that_says_when_it_was_measured_is_kept_as_it_is() {
        let text = "- mode: **full**\n- date: 2026-12-07T10:00:00.1Z; whole run took 5 s\n- this run measured items 9 only (`--only`); the other sections are copied unchanged from the report that was at this path before (mode: **full**), each saying when it was measured\n\n## 4. Sched\n\n- this item took 12 s (measured 2026-12-01T00:00:00Z)\n";
        let e = Earlier::parse(text);
        assert_eq!(
            e.item(4).unwrap(),
            "## 4. Sched\n\n- this item took 12 s (measured 2026-12-01T00:00:00Z)\n"
        );
    }

    #[test]
    fn times_are_cut_to_the_second() {
        for (t, want) in [
            ("2026-12-06T08:45:56.281210187Z", "2026-12-06T08:45:56Z"),
            ("2026-12-06T08:45:56Z", "2026-12-06T08:45:56Z"),
            ("unknown", "unknown"),
        ] {
            assert_eq!(to_second(t), want);
        }
    }
}
