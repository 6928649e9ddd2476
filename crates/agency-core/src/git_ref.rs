//! Branch names an agent may name to `repo_push`, and the prefix a handler
//! owns on a repo's origin.
//!
//! The rule is stricter than `git check-ref-format --branch`: a name this
//! accepts is one git accepts, never the other way round, so a name cannot
//! be read as an option (`-f`), a revision expression (`@{-1}`, `x^`), a
//! refspec (`a:b`, `+a`) or a full ref (`refs/heads/main`), and cannot climb
//! out of the handler's prefix (`../main`).

use crate::ids::HandlerId;
use crate::validate::InvalidInput;

/// Longest branch name accepted, in bytes (git has no limit; ours keeps the
/// pushed ref, the prefix and the audit line readable).
pub const MAX_BRANCH_BYTES: usize = 200;

/// Check a branch name: 1–200 bytes of ASCII letters, digits, `.`, `_`,
/// `-` and `/`; slash-separated components, none empty, none starting with
/// `.` or `-`, none ending in `.lock` or `.`; no `..`; not `HEAD`; not
/// starting with `refs/`.
pub fn check_branch(what: &str, name: &str) -> Result<(), InvalidInput> {
    let bad = |why: &str| {
        Err(InvalidInput(format!(
            "failed to accept {what} {name:?}: {why}; use a plain branch name such as \"fix/parser\""
        )))
    };
    if name.is_empty() || name.len() > MAX_BRANCH_BYTES {
        return bad(&format!("give 1-{MAX_BRANCH_BYTES} bytes"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
    {
        return bad("use only ASCII letters, digits, '.', '_', '-' and '/'");
    }
    if name == "HEAD" || name.starts_with("refs/") {
        return bad("name a branch, not HEAD or a full ref");
    }
    if name.contains("..") {
        return bad("'..' is not allowed");
    }
    for part in name.split('/') {
        if part.is_empty() {
            return bad("no empty component (leading, trailing or double '/')");
        }
        if part.starts_with('.') || part.starts_with('-') {
            return bad("no component may start with '.' or '-'");
        }
        if part.ends_with('.') || part.ends_with(".lock") {
            return bad("no component may end with '.' or '.lock'");
        }
    }
    Ok(())
}

/// The branch on a repo's origin that `repo_push` writes for `branch` of
/// handler `h`: `agency/<handler id>/<branch>`. Everything under
/// `agency/<handler id>/` is the handler's; nothing else is.
pub fn push_branch(h: HandlerId, branch: &str) -> String {
    format!("agency/{h}/{branch}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plain_branch_names_are_accepted() {
        for ok in [
            "main",
            "fix/parser",
            "a.b",
            "v1.2-rc_3",
            "x/y/z",
            "HEADS",
            "my-refs/x",
        ] {
            check_branch("branch", ok).unwrap();
        }
        check_branch("branch", &"a".repeat(MAX_BRANCH_BYTES)).unwrap();
    }

    #[test]
    fn names_that_leave_the_prefix_or_mean_something_else_are_refused() {
        for bad in [
            "",
            "../main",
            "a/../b",
            "a..b",
            "refs/heads/main",
            "-f",
            "a/-f",
            "--force",
            "x:main",
            "+main",
            "@{-1}",
            "a@{u}",
            "@",
            "HEAD",
            "a b",
            "a\tb",
            "a\nb",
            "a\0b",
            "a~1",
            "a^",
            "a*",
            "a?",
            "a[b",
            "a\\b",
            "/a",
            "a/",
            "a//b",
            ".hidden",
            "a/.b",
            "a.lock",
            "a/b.lock/c",
            "a.",
            "é",
        ] {
            let e = check_branch("branch", bad).unwrap_err();
            assert!(e.0.contains("failed to accept branch"), "{bad:?}: {e}");
        }
        assert!(check_branch("branch", &"a".repeat(MAX_BRANCH_BYTES + 1)).is_err());
    }

    #[test]
    fn the_pushed_branch_is_under_the_handlers_prefix() {
        let h = HandlerId(uuid::Uuid::from_u128(7));
        assert_eq!(
            push_branch(h, "fix/x"),
            format!("agency/{}/fix/x", uuid::Uuid::from_u128(7))
        );
    }
}
