//! `agency --help` lists its commands in groups. clap lists a command's
//! subcommands under one heading only, so the top-level help gets a
//! template whose command list is written here, from the command
//! definitions themselves (each command's name and `about`), laid out as
//! clap lays out its own list; only which group a command belongs to is
//! written down by hand, and a test checks that every visible command is
//! in exactly one group.

use std::fmt::Write as _;

/// The groups of `agency --help`, in order, and their commands in the
/// order shown. Hidden commands (run by the daemon or by agents'
/// configurations, not by hand) are in none.
pub const GROUPS: &[(&str, &[&str])] = &[
    (
        "Everyday",
        &[
            "init",
            "serve",
            "status",
            "watch",
            "problems",
            "dashboard",
            "shutdown",
            "reload",
            "demo",
            "send",
            "tell",
            "inbox",
            "handlers",
            "outcomes",
            "outcome",
            "reopen",
            "agents",
            "stop",
            "model",
            "keep-warm",
            "help",
        ],
    ),
    (
        "Organisations",
        &[
            "compile",
            "schema",
            "explain",
            "pipeline",
            "lessons",
            "up",
            "down",
            "orgs",
            "key",
            "ask",
            "answer",
            "conversations",
        ],
    ),
    (
        "Spend and risk",
        &[
            "cost",
            "budget",
            "pause",
            "resume",
            "grant",
            "caps",
            "revoke",
            "approvals",
            "approve",
            "deny",
            "mcp",
        ],
    ),
    (
        "Records",
        &[
            "runs",
            "run",
            "transcript",
            "logs",
            "audit",
            "mail",
            "kb",
            "memory",
            "fsck",
            "gc",
            "store",
        ],
    ),
    (
        "Plumbing",
        &[
            "tools",
            "token",
            "mcp-stdio",
            "model-server",
            "completions",
            "man",
        ],
    ),
];

/// The heading of visible commands that no group names (a test keeps
/// this group empty; it exists so that such a command is never lost).
const OTHER: &str = "Other";

/// The help template of the top-level command: clap's default layout
/// with its single "Commands:" list replaced by the groups.
pub fn template(cmd: &clap::Command) -> String {
    // clap adds its `help` subcommand when it builds the command; build a
    // copy to see every command the user can type.
    let mut built = cmd.clone();
    built.build();
    let styles = built.get_styles();
    let (header, literal) = (styles.get_header(), styles.get_literal());
    let visible: Vec<&clap::Command> = built
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .collect();
    let in_group = |name: &str| GROUPS.iter().any(|(_, names)| names.contains(&name));
    let others: Vec<&str> = visible
        .iter()
        .map(|c| c.get_name())
        .filter(|n| !in_group(n))
        .collect();
    let groups = GROUPS
        .iter()
        .copied()
        .chain((!others.is_empty()).then_some((OTHER, others.as_slice())));
    let longest = visible
        .iter()
        .map(|c| c.get_name().chars().count())
        .max()
        .unwrap_or(0);

    let mut out = String::from("{before-help}{about-with-newline}\n{usage-heading} {usage}\n");
    for (heading, names) in groups {
        let _ = write!(out, "\n{header}{heading}:{header:#}\n");
        for c in names
            .iter()
            .filter_map(|n| visible.iter().find(|c| c.get_name() == *n))
        {
            let name = c.get_name();
            let about = c
                .get_about()
                .or_else(|| c.get_long_about())
                .map(|a| a.to_string())
                .unwrap_or_default();
            let pad = longest - name.chars().count() + 2;
            let _ = writeln!(
                out,
                "  {literal}{name}{literal:#}{:pad$}{about}",
                "",
                about = about.trim_end()
            );
        }
    }
    let _ = write!(
        out,
        "\n{header}Options:{header:#}\n{{options}}{{after-help}}"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::GROUPS;

    /// The names of the subcommands of `cmd` as the user sees them, clap's
    /// `help` included.
    fn visible(hidden: bool) -> Vec<String> {
        let mut cmd = crate::cli::command();
        cmd.build();
        cmd.get_subcommands()
            .filter(|c| c.is_hide_set() == hidden)
            .map(|c| c.get_name().to_owned())
            .collect()
    }

    #[test]
    fn every_visible_command_is_in_exactly_one_group() {
        let visible = visible(false);
        for name in &visible {
            let n = GROUPS
                .iter()
                .filter(|(_, names)| names.contains(&name.as_str()))
                .count();
            assert_eq!(n, 1, "`{name}` is in {n} groups of `agency --help`");
        }
        for (heading, names) in GROUPS {
            for name in *names {
                assert!(
                    visible.contains(&(*name).to_owned()),
                    "{heading}: `{name}` is no visible command"
                );
            }
            let mut sorted = names.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), names.len(), "{heading} repeats a command");
        }
    }

    #[test]
    fn the_help_shows_the_groups_and_hides_the_plumbing_only_the_daemon_runs() {
        let mut cmd = crate::cli::command();
        for help in [
            cmd.render_help().to_string(),
            cmd.render_long_help().to_string(),
        ] {
            let mut last = 0;
            for (heading, names) in GROUPS {
                let at = help
                    .find(&format!("\n{heading}:\n"))
                    .unwrap_or_else(|| panic!("no {heading} in {help}"));
                assert!(at > last, "{heading} out of order in {help}");
                last = at;
                for name in *names {
                    assert!(
                        help.contains(&format!("\n  {name}  ")),
                        "{name} missing in {help}"
                    );
                }
            }
            assert!(!help.contains("Other:"), "{help}");
            assert!(!help.contains("Commands:"), "{help}");
            assert!(help.contains("\nOptions:\n"), "{help}");
            assert!(help.contains("  -h, --help"), "{help}");
            assert!(help.contains("Exit status:"), "{help}");
            assert!(help.contains("Usage: agency [OPTIONS] <COMMAND>"), "{help}");
            for name in visible(true) {
                assert!(
                    !help.contains(&format!("\n  {name} ")),
                    "{name} shown: {help}"
                );
            }
            // The commands' descriptions come whole, braces and all.
            assert!(!help.contains('{'), "{help}");
        }
        let hidden = visible(true);
        for name in [
            "agent",
            "mcp-launch",
            "claude-warm",
            "sandbox-exec",
            "sandbox-forward",
            "hook",
            "__complete-ids",
        ] {
            assert!(hidden.contains(&name.to_owned()), "{name} not hidden");
        }
    }

    /// No help text anywhere in the command tree (about, long about, the
    /// arguments' help, after help) names an issue of the project.
    #[test]
    fn no_help_text_names_an_issue() {
        fn walk(cmd: &mut clap::Command, path: &str, bad: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            for help in [
                cmd.render_long_help().to_string(),
                cmd.render_help().to_string(),
            ] {
                let lower = help.to_lowercase();
                let mut rest = lower.as_str();
                while let Some(i) = rest.find("issue") {
                    rest = &rest[i + "issue".len()..];
                    let next = rest.trim_start_matches([' ', '\n', '#']);
                    if next.starts_with(|c: char| c.is_ascii_digit()) {
                        bad.push(format!("{path}: …issue{}", &rest[..rest.len().min(20)]));
                    }
                }
            }
            for sub in cmd.get_subcommands_mut() {
                walk(sub, &path, bad);
            }
        }
        let mut cmd = crate::cli::command();
        cmd.build();
        let mut bad = Vec::new();
        walk(&mut cmd, "", &mut bad);
        assert!(bad.is_empty(), "{bad:#?}");
    }
}
