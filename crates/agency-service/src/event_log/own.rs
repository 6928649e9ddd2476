//! The events this process committed, remembered so that the relay of a
//! shared store (`relay.rs`) does not hand this daemon's listeners its own
//! wake-ups a second time: they had them when the operation committed.
//!
//! Only kept once a relay runs ([`OwnEvents::enable`]), as ranges of event
//! numbers (an operation's events are numbered without a gap), at most
//! [`KEPT`] of them: a range forgotten early only means a repeat, which
//! listeners tolerate (each re-reads the state it cares about).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// Ranges kept: far more than commit between two relay reads.
const KEPT: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct OwnEvents {
    on: AtomicBool,
    /// `(first, last)`, in commit order.
    ranges: Mutex<VecDeque<(i64, i64)>>,
}

impl OwnEvents {
    /// Start remembering (a relay starts).
    pub(crate) fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// An operation of this process committed events `first..=last`.
    pub(crate) fn committed(&self, first: i64, last: i64) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let mut ranges = self.ranges.lock().unwrap_or_else(PoisonError::into_inner);
        ranges.push_back((first, last));
        if ranges.len() > KEPT {
            ranges.pop_front();
        }
    }

    /// Which of `seqs` (ascending) this process committed; ranges wholly
    /// at or below `upto` are forgotten, the relay having passed them.
    pub(crate) fn take_own(&self, seqs: &[i64], upto: i64) -> Vec<bool> {
        let mut ranges = self.ranges.lock().unwrap_or_else(PoisonError::into_inner);
        let own = seqs
            .iter()
            .map(|s| ranges.iter().any(|&(a, b)| a <= *s && *s <= b))
            .collect();
        ranges.retain(|&(_, last)| last > upto);
        own
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_ranges_are_skipped_then_forgotten() {
        let own = OwnEvents::default();
        own.committed(1, 3);
        assert_eq!(
            own.take_own(&[1, 2], 2),
            [false, false],
            "off until enabled"
        );
        own.enable();
        own.committed(5, 7);
        own.committed(10, 10);
        assert_eq!(
            own.take_own(&[4, 5, 7, 8, 10], 8),
            [false, true, true, false, true]
        );
        // 5..=7 is forgotten (passed); 10 is kept, not yet passed.
        assert_eq!(own.take_own(&[6, 10], 9), [false, true]);
        assert_eq!(own.take_own(&[10], 10), [true]);
        assert_eq!(own.take_own(&[10], 10), [false]);
    }

    #[test]
    fn at_most_kept_ranges_are_remembered() {
        let own = OwnEvents::default();
        own.enable();
        for i in 0..(KEPT as i64 + 10) {
            own.committed(i, i);
        }
        let seqs: Vec<i64> = (0..(KEPT as i64 + 10)).collect();
        let flags = own.take_own(&seqs, -1);
        assert_eq!(flags.iter().filter(|f| **f).count(), KEPT);
        assert!(!flags[0] && flags[KEPT + 9], "the oldest were dropped");
    }
}
