//! Whether a lesson's evidence admits it: pure rules, no store. A lesson
//! is admitted only when it recurs (proposed from two distinct runs, or
//! from one whose Safety or Correctness failed: severe), contradicts no
//! admitted lesson of its scope, and — outside this module — passes the
//! replay gate; a tool-policy or permission lesson then still waits for
//! the user. A rejected lesson is reconsidered only on new evidence.

use super::proposal::{USER_SCOPES, normalise};

/// Distinct runs a lesson needs, unless one of them was severe.
pub const MIN_RUNS: usize = 2;

/// What the evidence says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not enough evidence yet.
    Wait,
    Reject(String),
    /// Every evidence check passed: next, the replay gate.
    Replay,
}

/// After the replay gate passed: admitted, or waiting for the user.
pub fn after_replay(scope_kind: &str) -> AfterReplay {
    if USER_SCOPES.contains(&scope_kind) {
        AfterReplay::AwaitUser
    } else {
        AfterReplay::Admit
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterReplay {
    Admit,
    AwaitUser,
}

/// An admitted lesson it must not contradict: (id, title, advice).
pub type Admitted<'a> = (&'a str, &'a str, &'a str);

/// The verdict on a lesson with `advice`, proposed from `runs` distinct
/// runs (`severe`: one of them failed Safety or Correctness), against the
/// admitted lessons of its scope. `rejected_at`: the number of runs it
/// had when it was last rejected, if it was.
pub fn verdict(
    advice: &str,
    runs: usize,
    severe: bool,
    rejected_at: Option<usize>,
    admitted: &[Admitted<'_>],
) -> Verdict {
    if let Some(n) = rejected_at
        && runs <= n
    {
        return Verdict::Wait;
    }
    if runs < MIN_RUNS && !severe {
        return Verdict::Wait;
    }
    if let Some((id, title, _)) = admitted.iter().find(|(_, _, a)| contradicts(advice, a)) {
        return Verdict::Reject(format!(
            "it contradicts admitted lesson {id} ({title:?}) of the same scope"
        ));
    }
    Verdict::Replay
}

/// Words that turn advice into its opposite.
const NEGATIONS: &[&str] = &[
    "never", "not", "no", "avoid", "dont", "without", "stop", "skip", "nor", "cannot",
    // What is left of a contraction ("don't" is "don" and "t").
    "t",
];

/// Words that carry no advice.
const FILLER: &[&str] = &[
    "a", "an", "the", "and", "or", "to", "of", "in", "on", "for", "with", "it", "is", "be", "do",
    "does", "don", "doesn", "isn", "aren", "won", "shouldn", "mustn", "can", "s", "when", "always",
    "every", "each", "all", "any", "should", "must", "before", "after", "first", "then", "that",
    "this", "them", "their", "you", "your", "we", "our",
];

/// Two pieces of advice contradict when they are about the same thing
/// (at least two words in common, and at least half of the shorter one's
/// words) and exactly one of them is negated.
pub fn contradicts(a: &str, b: &str) -> bool {
    let (na, wa) = content(a);
    let (nb, wb) = content(b);
    if na == nb {
        return false;
    }
    let shared = wa.iter().filter(|w| wb.contains(w)).count();
    let smaller = wa.len().min(wb.len());
    shared >= 2 && shared * 2 >= smaller
}

/// Whether `s` is negated, and its content words (stemmed crudely: a
/// trailing `s` dropped), each once.
fn content(s: &str) -> (bool, Vec<String>) {
    let mut negated = false;
    let mut words: Vec<String> = Vec::new();
    for w in normalise(s, usize::MAX)
        .split('-')
        .filter(|w| !w.is_empty())
    {
        if NEGATIONS.contains(&w) {
            negated = true;
            continue;
        }
        if FILLER.contains(&w) {
            continue;
        }
        let stem = w.strip_suffix('s').filter(|s| s.len() > 2).unwrap_or(w);
        if !words.iter().any(|x| x == stem) {
            words.push(stem.to_owned());
        }
    }
    (negated, words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contradictions_table() {
        let cases = [
            (
                "Always write tests for endpoints",
                "Never write tests for endpoints",
                true,
            ),
            (
                "Run the migrations in a transaction",
                "Don't run migrations in a transaction",
                true,
            ),
            (
                "Avoid global state in handlers",
                "Use global state in handlers",
                true,
            ),
            (
                "Write tests for endpoints",
                "Write tests for every endpoint",
                false,
            ),
            (
                "Never commit secrets",
                "Never commit generated files",
                false,
            ),
            ("Never commit secrets", "Document the API", false),
            ("Write tests", "Do not deploy on Fridays", false),
        ];
        for (a, b, want) in cases {
            assert_eq!(contradicts(a, b), want, "{a:?} vs {b:?}");
            assert_eq!(contradicts(b, a), want, "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn verdicts_need_recurrence_or_severity_and_no_contradiction() {
        let admitted = [("L1", "tests", "Always write tests for endpoints")];
        let advice = "Add a health check";
        assert_eq!(verdict(advice, 1, false, None, &admitted), Verdict::Wait);
        assert_eq!(verdict(advice, 2, false, None, &admitted), Verdict::Replay);
        assert_eq!(verdict(advice, 1, true, None, &admitted), Verdict::Replay);
        let against = "Never write tests for endpoints";
        assert!(
            matches!(verdict(against, 3, false, None, &admitted), Verdict::Reject(r) if r.contains("L1"))
        );
        // Rejected at 2 runs: the same evidence does not bring it back.
        assert_eq!(verdict(advice, 2, false, Some(2), &[]), Verdict::Wait);
        assert_eq!(verdict(advice, 2, true, Some(2), &[]), Verdict::Wait);
        assert_eq!(verdict(advice, 3, false, Some(2), &[]), Verdict::Replay);
        assert_eq!(after_replay("pipeline"), AfterReplay::Admit);
        assert_eq!(after_replay("tool_policy"), AfterReplay::AwaitUser);
        assert_eq!(after_replay("permission"), AfterReplay::AwaitUser);
    }
}
