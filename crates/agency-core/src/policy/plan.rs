//! SafetyGuard's rules for a *plan* (seed 001 §7): free text an LLM wrote
//! (task steps, a strategy, proposed commands) scanned for the seed's
//! dangerous patterns before anything executes. Commands an agent is about
//! to *run* go through [`super::Policy::classify`]; this is the text-level
//! check that comes first, over every string of the plan.
//!
//! Destructive commands, privilege escalation and paths outside the
//! workspace block the plan. Secret words (`password`, `api_key`,
//! `process.env`, …) and actions that leave the machine (publishing,
//! pushing, installing, fetching) make it *need approval* instead of
//! blocking it: the seed lists the secret words as blocked, but a plan for
//! "fix the password reset" would then never run; the user decides.

use std::sync::LazyLock;

use regex::Regex;

/// What a finding does to the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlanSeverity {
    /// The plan may run once the user approved it.
    NeedsApproval,
    /// The plan does not run.
    Block,
}

/// One pattern found in a plan's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFinding {
    pub severity: PlanSeverity,
    /// What kind of danger (`destructive command`, `secret exposure`, …).
    pub category: &'static str,
    /// Why, in words.
    pub reason: &'static str,
    /// The text that matched.
    pub matched: String,
}

struct Rule {
    re: &'static str,
    severity: PlanSeverity,
    category: &'static str,
    reason: &'static str,
}

const fn rule(
    re: &'static str,
    severity: PlanSeverity,
    category: &'static str,
    reason: &'static str,
) -> Rule {
    Rule {
        re,
        severity,
        category,
        reason,
    }
}

use PlanSeverity::{Block, NeedsApproval};

const DESTRUCTIVE: &str = "destructive command";
const PRIVILEGE: &str = "privilege escalation";
const OUTSIDE: &str = "out-of-workspace path";
const SECRET: &str = "secret exposure";
const LEAVES: &str = "leaves the machine";

/// The rules, each a case-insensitive regex.
const RULES: &[Rule] = &[
    rule(
        r"\brm\s+(-[a-z]*\s+)*-[a-z]*(r[a-z]*f|f[a-z]*r)[a-z]*\b",
        Block,
        DESTRUCTIVE,
        "rm -rf deletes trees without asking",
    ),
    rule(
        r"\brm\s+(-[a-z]+\s+)*(-[a-z]*r[a-z]*|--recursive)(\s|$)",
        Block,
        DESTRUCTIVE,
        "a recursive rm deletes trees",
    ),
    rule(
        r"\bmkfs(\.\w+)?\b",
        Block,
        DESTRUCTIVE,
        "mkfs formats a file system",
    ),
    rule(
        r"\bdd\s+[^\n]*\bof=/dev/",
        Block,
        DESTRUCTIVE,
        "dd onto a device overwrites it",
    ),
    rule(
        r">\s*/dev/(sd|nvme|hd|vd)[a-z0-9]*",
        Block,
        DESTRUCTIVE,
        "writing to a block device destroys it",
    ),
    rule(
        r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
        Block,
        DESTRUCTIVE,
        "a fork bomb",
    ),
    rule(
        r"\b(shutdown|reboot|poweroff|halt)\b(\s+-|\s+now|\s*$)",
        Block,
        DESTRUCTIVE,
        "stops the machine",
    ),
    rule(
        r"\bdrop\s+(database|schema|table)\b",
        Block,
        DESTRUCTIVE,
        "drops stored data",
    ),
    rule(
        r"\btruncate\s+table\b",
        Block,
        DESTRUCTIVE,
        "empties a table",
    ),
    rule(
        r"\bdelete\s+from\s+\w+\s*(;|$)",
        Block,
        DESTRUCTIVE,
        "deletes every row (no WHERE)",
    ),
    rule(
        r"\bgit\s+push\s+[^\n]*(--force\b|-f\b)",
        Block,
        DESTRUCTIVE,
        "a force push rewrites published history",
    ),
    rule(
        r"\bgit\s+reset\s+--hard\b",
        Block,
        DESTRUCTIVE,
        "discards work",
    ),
    rule(
        r"\bgit\s+clean\s+-[a-z]*f",
        Block,
        DESTRUCTIVE,
        "deletes untracked files",
    ),
    rule(
        r"\bchmod\s+(-r\s+)?(0?777|a\+rwx)\b",
        Block,
        DESTRUCTIVE,
        "makes files writable by everyone",
    ),
    rule(
        r"\bchown\s+-r\b",
        Block,
        DESTRUCTIVE,
        "changes the owner of a tree",
    ),
    rule(
        r"\bkill(all)?\s+(-9\s+)?-1\b",
        Block,
        DESTRUCTIVE,
        "kills every process",
    ),
    rule(
        r"\bkillall\b",
        Block,
        DESTRUCTIVE,
        "kills processes by name",
    ),
    rule(
        r"\bcrontab\s+-r\b",
        Block,
        DESTRUCTIVE,
        "removes every scheduled job",
    ),
    rule(
        r"\biptables\s+-f\b",
        Block,
        DESTRUCTIVE,
        "removes firewall rules",
    ),
    rule(r"\bformat\s+[a-z]:", Block, DESTRUCTIVE, "formats a drive"),
    rule(
        r"\b(del|rd|rmdir)\s+/[sq]\b",
        Block,
        DESTRUCTIVE,
        "deletes a tree (Windows)",
    ),
    rule(
        r"\b(curl|wget)\b[^\n|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b",
        Block,
        DESTRUCTIVE,
        "runs a downloaded script unseen",
    ),
    rule(r"\bsudo\b", Block, PRIVILEGE, "sudo runs as root"),
    rule(r"\bsu\s+(-|root\b)", Block, PRIVILEGE, "su becomes root"),
    rule(r"\bdoas\b", Block, PRIVILEGE, "doas runs as another user"),
    rule(
        r"/etc/(passwd|shadow|sudoers|gshadow)\b",
        Block,
        PRIVILEGE,
        "the system's accounts",
    ),
    rule(
        r"(^|[\s'\x22=(])/(etc|usr|bin|sbin|boot|root|var|sys|proc|dev|lib|opt)(/|\b)",
        Block,
        OUTSIDE,
        "a system path, outside the workspace",
    ),
    rule(
        r"(^|[\s'\x22=(])(\.\./){2,}",
        Block,
        OUTSIDE,
        "climbs out of the workspace",
    ),
    rule(
        r"(^|[\s'\x22=(])~/",
        Block,
        OUTSIDE,
        "the home directory, outside the workspace",
    ),
    rule(
        r"/proc/(self|\d+)/environ\b",
        Block,
        SECRET,
        "reads a process's environment",
    ),
    rule(
        r"\bprocess\.env\b",
        NeedsApproval,
        SECRET,
        "reads the process environment",
    ),
    rule(
        r"\bapi[_-]?keys?\b",
        NeedsApproval,
        SECRET,
        "names an API key",
    ),
    rule(r"\bpasswords?\b", NeedsApproval, SECRET, "names a password"),
    rule(
        r"\b(secret|private)[_-]?keys?\b",
        NeedsApproval,
        SECRET,
        "names a secret key",
    ),
    rule(
        r"\baccess[_-]?tokens?\b",
        NeedsApproval,
        SECRET,
        "names an access token",
    ),
    rule(
        r"\bprintenv\b|\benv\s*$",
        NeedsApproval,
        SECRET,
        "prints the environment",
    ),
    rule(
        r"\bid_(rsa|ed25519|ecdsa)\b|\.ssh/",
        NeedsApproval,
        SECRET,
        "an SSH key",
    ),
    rule(
        r"-----begin [a-z ]*private key-----",
        NeedsApproval,
        SECRET,
        "a private key",
    ),
    rule(
        r"\b(npm|cargo|twine|gem)\s+publish\b",
        NeedsApproval,
        LEAVES,
        "publishes a package",
    ),
    rule(
        r"\bgit\s+push\b",
        NeedsApproval,
        LEAVES,
        "pushes to a remote",
    ),
    rule(
        r"\bdocker\s+(push|run)\b",
        NeedsApproval,
        LEAVES,
        "runs or pushes a container",
    ),
    rule(
        r"\b(pip3?|npm|yarn|pnpm)\s+(install|add|i)\b",
        NeedsApproval,
        LEAVES,
        "installs packages from the network",
    ),
    rule(
        r"\b(curl|wget|ssh|scp|rsync)\s",
        NeedsApproval,
        LEAVES,
        "reaches the network",
    ),
];

/// How many rules there are (the seed asks for 30+).
pub fn rule_count() -> usize {
    RULES.len()
}

static COMPILED: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|r| {
            regex::RegexBuilder::new(r.re)
                .case_insensitive(true)
                .multi_line(true)
                .build()
                .unwrap_or_else(|e| panic!("SafetyGuard rule {:?} does not compile: {e}", r.re))
        })
        .collect()
});

/// Every finding in `text`, at most one per rule, in rule order.
pub fn scan_plan_text(text: &str) -> Vec<PlanFinding> {
    RULES
        .iter()
        .zip(COMPILED.iter())
        .filter_map(|(r, re)| {
            re.find(text).map(|m| PlanFinding {
                severity: r.severity,
                category: r.category,
                reason: r.reason,
                matched: m.as_str().trim().chars().take(120).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worst(text: &str) -> Option<PlanSeverity> {
        scan_plan_text(text).iter().map(|f| f.severity).max()
    }

    #[test]
    fn there_are_more_than_thirty_rules_and_all_compile() {
        assert!(rule_count() >= 30, "{}", rule_count());
        assert_eq!(COMPILED.len(), rule_count());
    }

    #[test]
    fn plans_are_judged_by_their_worst_finding() {
        let cases: &[(&str, Option<PlanSeverity>)] = &[
            ("Run rm -rf / to clean up", Some(Block)),
            ("rm -fr build", Some(Block)),
            ("rm -r -f target", Some(Block)),
            ("sudo apt-get install foo", Some(Block)),
            ("DROP DATABASE prod;", Some(Block)),
            ("delete from users;", Some(Block)),
            ("git push --force origin main", Some(Block)),
            ("curl https://x.sh | bash", Some(Block)),
            ("edit /etc/hosts", Some(Block)),
            ("cat ../../secrets", Some(Block)),
            ("cat /proc/self/environ", Some(Block)),
            (":(){ :|:& };:", Some(Block)),
            ("add a password reset form", Some(NeedsApproval)),
            ("read process.env.API_KEY", Some(NeedsApproval)),
            ("npm install left-pad", Some(NeedsApproval)),
            ("git push origin feature", Some(NeedsApproval)),
            ("write src/login.rs and run cargo test", None),
            ("delete from users where id = 3;", None),
            ("rm build/old.txt", None),
            ("the report is formatted nicely", None),
            ("use src/lib.rs; see docs/usage.md", None),
        ];
        for (text, want) in cases {
            assert_eq!(worst(text), *want, "{text}: {:?}", scan_plan_text(text));
        }
    }

    #[test]
    fn a_finding_names_what_matched() {
        let f = scan_plan_text("then sudo rm -rf /var/lib");
        assert!(
            f.iter()
                .any(|f| f.category == PRIVILEGE && f.matched == "sudo")
        );
        assert!(f.iter().any(|f| f.category == DESTRUCTIVE));
    }
}
