//! Reopening a completed or closed outcome.
//!
//! Whoever could complete or close the outcome may reopen it, with a
//! rationale kept in its history. When the handler responsible for it has
//! retired (finishing a handler's root retires it and its subtree), the
//! outcome must not go back to a handler no agent will ever run for: the
//! nearest active boss above it becomes responsible again — for it and for
//! everything the retired subtree held, as force-stop's reclaim does — so it
//! can redo the work or delegate it afresh. The retired handlers stay
//! retired and what was revoked stays revoked: a new delegation grants anew.

use agency_core::access::{ReopenFacts, may_reopen};
use agency_core::outcome::check_reopen;
use agency_core::{HandlerId, MailTarget, OutcomeId, Principal};
use agency_store::{HandlerStatus, Tx};

use crate::Result;
use crate::access::visible_outcome;
use crate::error::ServiceError;
use crate::events::Event;
use crate::render::log;
use crate::render::{outcome_event, render_audit_log_file, render_outcome_file};
use crate::service::{Caller, Service, authenticate};
use crate::tree::outcomes::author;
pub use agency_api::ReopenReport;

/// Longest boss chain walked looking for an active handler; the handler tree
/// is far shallower, so reaching it means the rows are corrupt.
const MAX_CHAIN: usize = 10_000;

impl Service {
    /// Set a completed or closed outcome back to `open`. Allowed to the user,
    /// to the boss of the handler whose root it is, and to the responsible
    /// handler for its other outcomes; see the module doc for what happens
    /// when the responsible handler has retired.
    pub fn outcome_reopen(
        &self,
        who: Principal,
        id: OutcomeId,
        rationale: &str,
    ) -> Result<ReopenReport> {
        self.cfg.limits.check_reason("rationale", rationale)?;
        if rationale.trim().is_empty() {
            return Err(ServiceError::invalid(format!(
                "failed to reopen outcome {id}: give a rationale (why the work is not done after all)"
            )));
        }
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let (o, _) = visible_outcome(op.tx, &caller, id)?;
            let its_handler = op.tx.handler(HandlerId::from_root(id))?;
            let facts = match &caller {
                Caller::User => ReopenFacts {
                    caller_is_user: true,
                    ..ReopenFacts::default()
                },
                Caller::Handler { row, .. } => ReopenFacts {
                    caller_is_user: false,
                    is_callers_root: id == row.id.root(),
                    caller_responsible: o.responsible == row.id,
                    caller_is_boss_of_its_handler: its_handler
                        .as_ref()
                        .is_some_and(|h| h.boss == Some(row.id)),
                },
            };
            if !may_reopen(facts) {
                return Err(ServiceError::denied(format!(
                    "failed to reopen outcome {id}: only the handler that could complete or close it may reopen it ({}); message that handler instead",
                    if facts.is_callers_root {
                        "your own root is your boss's to reopen".to_owned()
                    } else {
                        format!("handler {} is responsible for it", o.responsible)
                    }
                )));
            }
            let status = check_reopen(o.status, o.process_inbox).map_err(|e| {
                ServiceError::invalid(format!("failed to reopen outcome {id}: {}", e.0))
            })?;
            let was = o.responsible;
            let owner = nearest_active(op.tx, was)?;
            let mut reclaimed = 0;
            if owner != was {
                let retired: Vec<HandlerId> = op
                    .tx
                    .handler_subtree(was)?
                    .into_iter()
                    .filter(|h| h.status != HandlerStatus::Active)
                    .map(|h| h.id)
                    .collect();
                reclaimed = op.tx.reassign_all(&retired, owner, op.now)?;
            }
            // Re-read: the reclaim may have changed the responsible handler.
            let mut o = op
                .tx
                .outcome(id)?
                .ok_or_else(|| ServiceError::not_found("outcome", id))?;
            let from = o.status;
            o.status = status;
            o.status_reason = None;
            o.updated_at = op.now;
            op.tx.update_outcome(&o)?;
            let a = author(&caller);
            let mut detail = format!("{from} -> open: {rationale}");
            if owner != was {
                detail.push_str(&format!(
                    " (handler {was} has retired; handler {owner} is responsible again and reclaimed {reclaimed} outcomes)"
                ));
                log(
                    op,
                    was,
                    None,
                    format!(
                        "outcome {id} reopened; responsibility passed to handler {owner}, this handler stays retired"
                    ),
                )?;
                render_audit_log_file(op, was, a)?;
            }
            outcome_event(op, id, a, "reopened", detail)?;
            render_outcome_file(op, id, a)?;
            // Parents list their unfinished children apart from the
            // finished ones (a bounded view): this one moved back.
            for p in op.tx.parents(id)? {
                render_outcome_file(op, p, a)?;
            }
            op.emit(Event::OutcomeStatusChanged {
                outcome: id,
                responsible: o.responsible,
                status: o.status,
            });
            if caller.handler() != Some(o.responsible) {
                let body = format!(
                    "Outcome kb://{id} ({}) was reopened by {}; you are responsible for it again.\n\nRationale:\n{rationale}\n\nRe-read it with outcome_view, then redo the work or delegate it.",
                    o.title,
                    match &caller {
                        Caller::User => "the user".to_owned(),
                        Caller::Handler { row, .. } => format!("handler {}", row.id),
                    }
                );
                op.system_mail(&caller, MailTarget::Handler(o.responsible), &format!("Outcome reopened: {}", o.title), &body);
            }
            Ok(ReopenReport {
                outcome: id,
                status: o.status,
                responsible: o.responsible,
                outcomes_reclaimed: reclaimed,
            })
        })
    }
}

/// `h` if it is active, else the nearest active handler up its boss chain.
/// The root handler never retires (its root is perpetual and it has no boss
/// to force-stop it), so a chain always ends at an active handler.
fn nearest_active(tx: &mut dyn Tx, h: HandlerId) -> Result<HandlerId> {
    let mut at = h;
    for _ in 0..MAX_CHAIN {
        let row = tx
            .handler(at)?
            .ok_or_else(|| ServiceError::not_found("handler", at))?;
        if row.status == HandlerStatus::Active {
            return Ok(at);
        }
        match row.boss {
            Some(b) => at = b,
            None => break,
        }
    }
    Err(ServiceError::invalid(format!(
        "failed to reopen: no active handler above handler {h} to take the outcome back; run `agency fsck`"
    )))
}
