//! How a domain [`Event`] reads in the log: its kind, whose area it is in,
//! one line, and its fields as data (the event's own, as the scheduler
//! sees them). Titles and subjects are read in the operation's
//! transaction, so the line says what was true when it happened.

use agency_api::EventKind;
use agency_core::{HandlerId, MailTarget, OutcomeId, OutcomeStatus};
use agency_store::Tx;

use super::Record;
use crate::Result;
use crate::events::Event;

/// The log's record of `e`; `None` for a wake-up whose fact the operation
/// recorded itself.
pub(super) fn describe(tx: &mut dyn Tx, e: &Event) -> Result<Option<Record>> {
    let r = match e {
        Event::PipelineRunReady { .. } | Event::LessonReplayReady { .. } => return Ok(None),
        Event::MessageDelivered { message, to } => {
            let m = tx.message(*message)?;
            let subject = m.as_ref().map(|m| m.subject.clone()).unwrap_or_default();
            let from = match &m {
                Some(m) => party(tx, m.from)?,
                None => "someone".to_owned(),
            };
            // Mail to the user belongs to its sender's area.
            let area = match (to, &m) {
                (MailTarget::Handler(h), _) => Some(*h),
                (MailTarget::User, Some(m)) => handler_of(m.from),
                (MailTarget::User, None) => None,
            };
            Record::new(
                EventKind::MailDelivered,
                area,
                format!(
                    "mail from {from} delivered to {}: {subject:?}",
                    party(tx, *to)?
                ),
            )
        }
        Event::MailScheduled {
            message,
            deliver_at,
        } => {
            let m = tx.message(*message)?;
            let area = m.as_ref().and_then(|m| handler_of(m.from));
            let subject = m.map(|m| m.subject).unwrap_or_default();
            Record::new(
                EventKind::MailScheduled,
                area,
                format!("mail {subject:?} deferred until {}", deliver_at.0),
            )
        }
        Event::OutcomeStatusChanged {
            outcome,
            responsible,
            status,
        } => {
            let title = outcome_title(tx, *outcome)?;
            let (kind, line) = if *status == OutcomeStatus::Open && created_now(tx, *outcome)? {
                (
                    EventKind::OutcomeCreated,
                    format!("outcome {title:?} created"),
                )
            } else {
                (
                    EventKind::OutcomeChanged,
                    format!("outcome {title:?} is now {status}"),
                )
            };
            Record::new(kind, Some(*responsible), line).outcome(*outcome)
        }
        Event::HandlerCreated { handler, boss } => {
            let line = match boss {
                Some(b) => format!("handler created under {}", handler_title(tx, *b)?),
                None => "root handler created".to_owned(),
            };
            Record::new(EventKind::HandlerCreated, Some(*handler), line)
        }
        Event::HandlerStopped { handler, agents } => Record::new(
            EventKind::HandlerStopped,
            Some(*handler),
            match agents.len() {
                0 => "handler stopped".to_owned(),
                n => format!("handler stopped; {n} live agent(s) ended"),
            },
        ),
        Event::CapabilityGranted {
            holder, resource, ..
        } => Record::new(
            EventKind::CapabilityGranted,
            Some(*holder),
            format!("granted {resource}"),
        ),
        Event::CapabilityRevoked {
            holder, resource, ..
        } => Record::new(
            EventKind::CapabilityRevoked,
            Some(*holder),
            format!("revoked {resource}"),
        ),
        Event::KbWritten {
            by, description, ..
        } => Record::new(
            EventKind::KbWritten,
            *by,
            format!("wrote KB file {description:?}"),
        ),
        Event::AgentStarted { agent, handler } => Record::new(
            EventKind::AgentStarted,
            Some(*handler),
            format!("agent {} started", short(agent)),
        )
        .agent(Some(*agent)),
        Event::AgentEnded { agent, handler } => {
            let reason = tx
                .agent(*agent)?
                .and_then(|a| a.end_reason)
                .unwrap_or_default();
            let line = match reason.as_str() {
                "" => format!("agent {} ended", short(agent)),
                r => format!("agent {} ended: {r}", short(agent)),
            };
            Record::new(EventKind::AgentEnded, Some(*handler), line).agent(Some(*agent))
        }
        Event::BudgetResumed { handler } => Record::new(
            EventKind::BudgetResumed,
            Some(*handler),
            "budget resumed: paused work may run again",
        ),
        Event::ApprovalDecided {
            handler, approved, ..
        } => Record::new(
            EventKind::ApprovalDecided,
            Some(*handler),
            if *approved {
                "approval granted by the user"
            } else {
                "approval denied by the user"
            },
        ),
        Event::KeepWarmChanged { handler } => Record::new(
            EventKind::HandlerKeepWarm,
            Some(*handler),
            "keep-warm setting changed",
        ),
        Event::OrgMessageAnswered { agency, .. } => Record::new(
            EventKind::AgencyAnswered,
            None,
            format!("agency {agency:?} answered a message from outside"),
        ),
    };
    Ok(Some(r.data(fields(e))))
}

/// The event's own fields, without its tag.
fn fields(e: &Event) -> serde_json::Value {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("event");
    }
    v
}

fn short(id: &impl std::fmt::Display) -> String {
    id.to_string().chars().take(8).collect()
}

fn outcome_title(tx: &mut dyn Tx, o: OutcomeId) -> Result<String> {
    Ok(tx.outcome(o)?.map(|o| o.title).unwrap_or_default())
}

/// An outcome reported `open` that was never updated since it was made:
/// its creation (a reopened outcome was updated after it was made).
fn created_now(tx: &mut dyn Tx, o: OutcomeId) -> Result<bool> {
    Ok(tx.outcome(o)?.is_some_and(|o| o.created_at == o.updated_at))
}

fn handler_of(p: MailTarget) -> Option<HandlerId> {
    match p {
        MailTarget::User => None,
        MailTarget::Handler(h) => Some(h),
    }
}

pub(crate) fn handler_title(tx: &mut dyn Tx, h: HandlerId) -> Result<String> {
    Ok(format!("{:?}", outcome_title(tx, h.root())?))
}

/// "the user" or a handler's quoted title.
pub(crate) fn party(tx: &mut dyn Tx, p: MailTarget) -> Result<String> {
    match p {
        MailTarget::User => Ok("the user".to_owned()),
        MailTarget::Handler(h) => handler_title(tx, h),
    }
}
