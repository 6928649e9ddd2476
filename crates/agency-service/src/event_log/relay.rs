//! Events other daemons caused, for this daemon's listeners.
//!
//! On a store several daemons share, an operation's events reach only the
//! listeners of the daemon that ran it (its scheduler, its agents' mail
//! waits, its event streams); the log is what they all share. The relay
//! reads the log after a cursor and hands this daemon's listeners the
//! wake-ups it holds: new and deferred mail, outcomes, handlers created or stopped,
//! agents ended, approvals decided, budgets resumed, capabilities and
//! keep-warm changed. A daemon's own events are passed over (`own.rs`):
//! its listeners had them at commit.

use agency_store::{EventFilter, EventScope};

use crate::Result;
use crate::events::Event;
use crate::service::System;

/// The event a log row's kind records, as the event's tag; `None` for a
/// kind that wakes nobody.
fn tag_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "mail.delivered" => "message_delivered",
        // Whoever delivers deferred mail learns of its time.
        "mail.scheduled" => "mail_scheduled",
        "outcome.created" | "outcome.changed" => "outcome_status_changed",
        "handler.created" => "handler_created",
        "handler.stopped" => "handler_stopped",
        "agent.ended" => "agent_ended",
        "approval.decided" => "approval_decided",
        "budget.resumed" => "budget_resumed",
        "capability.granted" => "capability_granted",
        "capability.revoked" => "capability_revoked",
        "handler.keep_warm" => "keep_warm_changed",
        _ => return None,
    })
}

/// The domain event a log row holds (its `data` is the event's fields).
pub(crate) fn event_of(kind: &str, data: &str) -> Option<Event> {
    let tag = tag_of(kind)?;
    let mut v: serde_json::Value = serde_json::from_str(data).ok()?;
    v.as_object_mut()?.insert(
        "event".to_owned(),
        serde_json::Value::String(tag.to_owned()),
    );
    serde_json::from_value(v).ok()
}

impl System {
    /// Daemon: the log's last event number (where a relay starts).
    pub fn event_log_end(&self) -> Result<i64> {
        // From here on, remember which events are this daemon's own.
        self.own_events.enable();
        self.read(|tx| Ok(tx.last_event_seq()?))
    }

    /// Daemon, on a shared store: publish to this daemon's listeners the
    /// wake-ups among the events logged after `after` (at most `limit`
    /// rows read), and tell its event streams the log moved. The cursor
    /// to pass next time.
    pub fn relay_logged_events(&self, after: i64, limit: usize) -> Result<i64> {
        let rows = self.read(|tx| {
            Ok(tx.events_after(&EventFilter {
                after,
                scope: EventScope::All,
                kinds: Vec::new(),
                since: None,
                limit,
            })?)
        })?;
        let Some(last) = rows.last().map(|r| r.seq) else {
            return Ok(after);
        };
        let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
        let own = self.own_events.take_own(&seqs, last);
        for (r, own) in rows.iter().zip(own) {
            if own {
                continue;
            }
            if let Some(e) = event_of(&r.event.kind, &r.event.data) {
                // No listener is not an error: nothing waits now.
                let _ = self.events.send(e);
            }
        }
        self.event_seq.send_if_modified(|seen| {
            let moved = *seen < last;
            *seen = (*seen).max(last);
            moved
        });
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agency_core::{HandlerId, MailTarget, MessageId};

    #[test]
    fn logged_wake_ups_read_back_as_their_events() {
        let h = HandlerId(uuid::Uuid::from_u128(7));
        let m = MessageId(uuid::Uuid::from_u128(9));
        let e = Event::MessageDelivered {
            message: m,
            to: MailTarget::Handler(h),
        };
        let mut data = serde_json::to_value(&e).unwrap_or_default();
        data.as_object_mut().map(|o| o.remove("event"));
        assert_eq!(event_of("mail.delivered", &data.to_string()), Some(e));
        assert_eq!(
            event_of("kb.written", &data.to_string()),
            None,
            "wakes nobody"
        );
        assert_eq!(event_of("mail.delivered", "not json"), None);
        assert_eq!(event_of("mail.delivered", "{}"), None, "fields missing");
    }
}
