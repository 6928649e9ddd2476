//! Outcome statuses and the legal changes between them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::validate::InvalidInput;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    Open,
    /// Not workable now; the reason is kept beside the status.
    Blocked,
    /// The responsible handler believes its root outcome is done and asked its
    /// boss to verify. Without this state the daemon would respawn agents for
    /// an outcome only the boss may complete.
    AwaitingVerification,
    Completed,
    /// Disproven or abandoned; the rationale is kept beside the status.
    Closed,
}

impl OutcomeStatus {
    pub const ALL: [OutcomeStatus; 5] = [
        OutcomeStatus::Open,
        OutcomeStatus::Blocked,
        OutcomeStatus::AwaitingVerification,
        OutcomeStatus::Completed,
        OutcomeStatus::Closed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Open => "open",
            OutcomeStatus::Blocked => "blocked",
            OutcomeStatus::AwaitingVerification => "awaiting_verification",
            OutcomeStatus::Completed => "completed",
            OutcomeStatus::Closed => "closed",
        }
    }

    /// Completed and closed outcomes are finished: nothing changes them again.
    pub fn is_finished(self) -> bool {
        matches!(self, OutcomeStatus::Completed | OutcomeStatus::Closed)
    }
}

impl fmt::Display for OutcomeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OutcomeStatus {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OutcomeStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                InvalidInput(format!(
                    "unknown outcome status {s:?}: expected open, blocked, awaiting_verification, completed or closed"
                ))
            })
    }
}

/// What a caller asks to do to an outcome's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusChange {
    /// A plain update; only `open` and `blocked` may be set this way.
    Set(OutcomeStatus),
    RequestCompletion,
    Complete,
    Close,
}

/// Decide whether `change` is legal from `current`, returning the new status.
///
/// Who may ask is decided elsewhere ([`crate::access`]); this is only about
/// the state machine.
pub fn check_status_change(
    current: OutcomeStatus,
    perpetual: bool,
    change: StatusChange,
) -> Result<OutcomeStatus, InvalidInput> {
    if current.is_finished() {
        return Err(InvalidInput(format!(
            "the outcome is already {current}; a finished outcome does not change again: create a new outcome instead"
        )));
    }
    if perpetual && change != StatusChange::Set(OutcomeStatus::Open) {
        return Err(InvalidInput::new(
            "the outcome is perpetual (the root outcome): it stays open and cannot be blocked, completed or closed",
        ));
    }
    match change {
        StatusChange::Set(to @ (OutcomeStatus::Open | OutcomeStatus::Blocked)) => Ok(to),
        StatusChange::Set(OutcomeStatus::AwaitingVerification) => Err(InvalidInput::new(
            "awaiting_verification is set only by requesting completion (outcome_request_completion)",
        )),
        StatusChange::Set(to) => Err(InvalidInput(format!(
            "status {to} is set only by the complete or close operation, which take a rationale"
        ))),
        StatusChange::RequestCompletion => match current {
            OutcomeStatus::AwaitingVerification => Err(InvalidInput::new(
                "completion was already requested; wait for your boss to verify it",
            )),
            _ => Ok(OutcomeStatus::AwaitingVerification),
        },
        StatusChange::Complete => Ok(OutcomeStatus::Completed),
        StatusChange::Close => Ok(OutcomeStatus::Closed),
    }
}

/// Decide whether an outcome may be reopened, returning the status it gets
/// (`open`). Only a finished (completed or closed) work outcome can be: the
/// perpetual root never finishes, and a Process Inbox outcome is opened by
/// Agency itself when mail arrives.
///
/// Who may ask is decided elsewhere ([`crate::access::may_reopen`]).
pub fn check_reopen(
    current: OutcomeStatus,
    process_inbox: bool,
) -> Result<OutcomeStatus, InvalidInput> {
    if !current.is_finished() {
        return Err(InvalidInput(format!(
            "it is {current}, not completed or closed; only a finished outcome can be reopened"
        )));
    }
    if process_inbox {
        return Err(InvalidInput::new(
            "it is a Process Inbox outcome; Agency opens a new one when mail arrives",
        ));
    }
    Ok(OutcomeStatus::Open)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::OutcomeStatus::*;
    use super::*;

    #[test]
    fn reopen_table() {
        assert_eq!(check_reopen(Completed, false).unwrap(), Open);
        assert_eq!(check_reopen(Closed, false).unwrap(), Open);
        for st in [Open, Blocked, AwaitingVerification] {
            assert!(check_reopen(st, false).is_err(), "{st}");
        }
        assert!(check_reopen(Completed, true).is_err());
    }

    #[test]
    fn status_machine_table() {
        use StatusChange as C;
        // (current, perpetual, change, expected new status or None for refusal)
        let cases: &[(OutcomeStatus, bool, StatusChange, Option<OutcomeStatus>)] = &[
            (Open, false, C::Set(Blocked), Some(Blocked)),
            (Blocked, false, C::Set(Open), Some(Open)),
            (AwaitingVerification, false, C::Set(Open), Some(Open)),
            (Open, false, C::Set(Completed), None),
            (Open, false, C::Set(AwaitingVerification), None),
            (
                Open,
                false,
                C::RequestCompletion,
                Some(AwaitingVerification),
            ),
            (
                Blocked,
                false,
                C::RequestCompletion,
                Some(AwaitingVerification),
            ),
            (AwaitingVerification, false, C::RequestCompletion, None),
            (AwaitingVerification, false, C::Complete, Some(Completed)),
            (Open, false, C::Close, Some(Closed)),
            (Completed, false, C::Set(Open), None),
            (Closed, false, C::Complete, None),
            (Open, true, C::Complete, None),
            (Open, true, C::Close, None),
            (Open, true, C::Set(Blocked), None),
            (Open, true, C::RequestCompletion, None),
            (Open, true, C::Set(Open), Some(Open)),
        ];
        for &(cur, perp, change, want) in cases {
            let got = check_status_change(cur, perp, change).ok();
            assert_eq!(got, want, "{cur} perpetual={perp} {change:?}");
        }
    }

    #[test]
    fn parse_round_trip() {
        for st in OutcomeStatus::ALL {
            assert_eq!(st.as_str().parse::<OutcomeStatus>().unwrap(), st);
        }
        assert!("done".parse::<OutcomeStatus>().is_err());
    }
}
