//! The model upstream per handler ("the model per handler
//! may differ"). The user gives a handler one of the `[models.NAME]` of
//! agency.toml (`agency model set`); its agents are started on it and the
//! model gateway serves them that upstream and no other. A handler without
//! one inherits its nearest boss's; with none on the way up, the runtime's
//! `upstream` holds (the daemon's choice, outside the store).
//!
//! Only the user sets it: a model is spend, and an agent choosing a dearer
//! one for itself or its underlings is what budgets are there to prevent.

use agency_core::{HandlerId, Principal};
use agency_store::Tx;

use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Service, System, authenticate};
use crate::{Result, ServiceError};
pub use agency_api::HandlerModel;

impl Service {
    /// The user: give `handler` (and, unless they have their own, its
    /// underlings) the upstream `[models.NAME]`, or clear it (`None`).
    /// The name must be one the running daemon's runtime can use.
    pub fn model_set(
        &self,
        who: Principal,
        handler: HandlerId,
        upstream: Option<&str>,
    ) -> Result<HandlerModel> {
        if let Some(name) = upstream {
            agency_core::validate::check_name("model upstream", name)?;
            if let Some(d) = self.declared()
                && !d.models.contains(name)
            {
                let usable = if d.models.is_empty() {
                    "agency.toml declares none this runtime can use; add [models.NAME] first"
                        .to_owned()
                } else {
                    format!(
                        "usable: {}",
                        d.models.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                };
                return Err(ServiceError::invalid(format!(
                    "failed to set the model of handler {handler}: no [models.{name}] this runtime can use ({usable})"
                )));
            }
        }
        self.write(|op| {
            if !matches!(authenticate(op.tx, who)?, Caller::User) {
                return Err(ServiceError::denied(format!(
                    "failed to set the model of handler {handler}: only the user sets models"
                )));
            }
            if op.tx.handler(handler)?.is_none() {
                return Err(ServiceError::not_found("handler", handler));
            }
            op.tx.set_handler_model(handler, upstream, op.now)?;
            let summary = match upstream {
                Some(u) => format!("model upstream set to {u} by the user"),
                None => "model upstream cleared by the user (inherited again)".to_owned(),
            };
            log(op, handler, None, summary)?;
            render_audit_log_file(op, handler, Author::default())?;
            handler_model(op.tx, handler)
        })
    }

    /// The user, or an agent of `handler` itself: its model upstream.
    pub fn model_show(&self, who: Principal, handler: HandlerId) -> Result<HandlerModel> {
        self.read(|tx| {
            match authenticate(tx, who)? {
                Caller::User => {}
                Caller::Handler { row, .. } if row.id == handler => {}
                Caller::Handler { .. } => {
                    return Err(ServiceError::denied(format!(
                        "failed to read the model of handler {handler}: only the user and the handler itself may"
                    )));
                }
            }
            if tx.handler(handler)?.is_none() {
                return Err(ServiceError::not_found("handler", handler));
            }
            handler_model(tx, handler)
        })
    }
}

/// The nearest upstream set on `handler` or up its chain of bosses (one
/// statement: the gateway reads it with every call's token).
pub(crate) fn handler_model(tx: &mut dyn Tx, handler: HandlerId) -> Result<HandlerModel> {
    let nearest = tx.handler_model_up(handler)?;
    Ok(HandlerModel {
        handler,
        own: nearest
            .as_ref()
            .filter(|(on, _)| *on == handler)
            .map(|(_, u)| u.clone()),
        set_on: nearest.as_ref().map(|(on, _)| *on),
        effective: nearest.map(|(_, u)| u),
    })
}

impl System {
    /// Daemon: the upstream `handler`'s agents use (`None`: the runtime's),
    /// for the supervisor at spawn and the gateway at each call.
    pub fn model_effective(&self, handler: HandlerId) -> Result<Option<String>> {
        self.read(|tx| Ok(handler_model(tx, handler)?.effective))
    }

    /// Gateway: the agent `token` names and the upstream its handler's
    /// agents use ([`System::model_effective`]), in one read.
    pub fn token_model(&self, token: &str) -> Result<(crate::TokenIdentity, Option<String>)> {
        let h = crate::agents::tokens::token_hash(token)?;
        self.read(|tx| {
            let id = crate::agents::tokens::identity_in(tx, &h)?;
            let chosen = handler_model(tx, id.handler)?.effective;
            Ok((id, chosen))
        })
    }
}
