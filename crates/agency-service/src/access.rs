//! Gathering the facts for access decisions inside a transaction, and the
//! "load or refuse" helpers every operation starts with. The decisions
//! themselves are `agency_core::access`.

use agency_core::access::{FileKind, KbFacts, OwnerRelation, may_add_child};
use agency_core::{
    FileId, HandlerId, Level, OutcomeAccess, OutcomeFacts, OutcomeId, Resource, kb_access,
    outcome_access,
};
use agency_store::{FileRow, HandlerStatus, OutcomeRow, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::service::Caller;

/// Facts about (caller, outcome), read in the caller's transaction.
pub(crate) fn outcome_facts(
    tx: &mut dyn Tx,
    caller: &Caller,
    o: &OutcomeRow,
) -> Result<OutcomeFacts> {
    let handler_of_root = tx
        .handler(HandlerId::from_root(o.id))?
        .filter(|h| h.status == HandlerStatus::Active);
    match caller {
        Caller::User => Ok(OutcomeFacts {
            caller_is_user: true,
            caller_is_boss_of_its_handler: handler_of_root.is_some_and(|h| h.boss.is_none()),
            ..OutcomeFacts::default()
        }),
        Caller::Handler { row, .. } => {
            let mut f = OutcomeFacts {
                is_callers_root: o.id == row.id.root(),
                caller_responsible: o.responsible == row.id,
                caller_is_boss_of_its_handler: handler_of_root
                    .is_some_and(|h| h.boss == Some(row.id)),
                ..OutcomeFacts::default()
            };
            // The area walk is the only costly fact; skip it when the
            // cheaper facts already decide.
            if !f.caller_responsible && !f.caller_is_boss_of_its_handler && !f.is_callers_root {
                let root = row.id.root();
                f.in_callers_area = tx.is_descendant_or_self(o.id, root)?
                    || tx.is_descendant_or_self(root, o.id)?;
            }
            Ok(f)
        }
    }
}

pub(crate) fn outcome_access_of(
    tx: &mut dyn Tx,
    caller: &Caller,
    o: &OutcomeRow,
) -> Result<OutcomeAccess> {
    Ok(outcome_access(outcome_facts(tx, caller, o)?))
}

/// Load an outcome the caller may see, or `NotFound` (also when it exists
/// but is invisible to the caller).
pub(crate) fn visible_outcome(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: OutcomeId,
) -> Result<(OutcomeRow, OutcomeAccess)> {
    let Some(o) = tx.outcome(id)? else {
        return Err(ServiceError::not_found("outcome", id));
    };
    let access = outcome_access_of(tx, caller, &o)?;
    if access == OutcomeAccess::Invisible {
        return Err(ServiceError::not_found("outcome", id));
    }
    Ok((o, access))
}

/// Load an outcome the caller may change.
pub(crate) fn writable_outcome(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: OutcomeId,
    what: &str,
) -> Result<OutcomeRow> {
    let (o, access) = visible_outcome(tx, caller, id)?;
    if access != OutcomeAccess::Write {
        return Err(ServiceError::denied(write_refusal(caller, &o, what)));
    }
    Ok(o)
}

/// Load an outcome the caller may add children under.
pub(crate) fn parent_outcome(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: OutcomeId,
) -> Result<OutcomeRow> {
    let (o, _) = visible_outcome(tx, caller, id)?;
    let facts = outcome_facts(tx, caller, &o)?;
    if !may_add_child(facts) {
        return Err(ServiceError::denied(write_refusal(
            caller,
            &o,
            "add a child outcome under",
        )));
    }
    if o.status.is_finished() {
        return Err(ServiceError::invalid(format!(
            "failed to add a child under outcome {}: it is {}",
            o.id, o.status
        )));
    }
    Ok(o)
}

fn write_refusal(caller: &Caller, o: &OutcomeRow, what: &str) -> String {
    match caller {
        Caller::User => format!(
            "failed to {what} outcome {}: the user does not edit outcomes directly; send mail to the handler responsible ({})",
            o.id, o.responsible
        ),
        Caller::Handler { row, .. } if o.id == row.id.root() => format!(
            "failed to {what} outcome {}: it is your own root outcome, which only your boss may change; when it is done, request completion",
            o.id
        ),
        Caller::Handler { .. } => format!(
            "failed to {what} outcome {}: handler {} is responsible for it (it is inside a subtree you delegated, or outside your area); message that handler instead",
            o.id, o.responsible
        ),
    }
}

/// The caller's level on a file, or `None` when the file does not exist for
/// the caller.
pub(crate) fn kb_level(tx: &mut dyn Tx, caller: &Caller, file: &FileRow) -> Result<Option<Level>> {
    let Caller::Handler { row, .. } = caller else {
        return Ok(kb_access(KbFacts {
            caller_is_user: true,
            kind: file.kind,
            owner: OwnerRelation::Other,
            cap: None,
            outcome_readable: false,
        }));
    };
    let cap = tx
        .capabilities_on(row.id, &Resource::Kb(file.id))?
        .iter()
        .map(|c| c.level)
        .max();
    let owner = match file.owner {
        Some(o) if o == row.id => OwnerRelation::Owner,
        Some(o) => match tx.handler(o)? {
            Some(h) if h.boss == Some(row.id) => OwnerRelation::BossOfOwner,
            _ => OwnerRelation::Other,
        },
        None => OwnerRelation::Other,
    };
    let outcome_readable = if file.kind == FileKind::Outcome {
        match tx.outcome(OutcomeId(file.id.0))? {
            Some(o) => outcome_access_of(tx, caller, &o)? != OutcomeAccess::Invisible,
            None => false,
        }
    } else {
        false
    };
    Ok(kb_access(KbFacts {
        caller_is_user: false,
        kind: file.kind,
        owner,
        cap,
        outcome_readable,
    }))
}

/// Load a file the caller holds at least `need` on. Missing and invisible
/// files give the same `NotFound`.
pub(crate) fn file_at_level(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: FileId,
    need: Level,
    what: &str,
) -> Result<(FileRow, Level)> {
    let Some(file) = tx.file(id)? else {
        return Err(ServiceError::not_found("KB file", id));
    };
    let Some(level) = kb_level(tx, caller, &file)? else {
        return Err(ServiceError::not_found("KB file", id));
    };
    ensure_level(id, level, need, what)?;
    Ok((file, level))
}

/// Refuse unless `level` (the caller's on file `id`) is at least `need`.
pub(crate) fn ensure_level(id: FileId, level: Level, need: Level, what: &str) -> Result<()> {
    if level < need {
        return Err(ServiceError::denied(format!(
            "failed to {what} KB file {id}: you have {level} access and this needs {need}; ask your boss to grant {need} on it"
        )));
    }
    Ok(())
}
