//! Agency API keys: the user mints a key for one agency and hands it to an
//! outside party, who may then send that agency messages and read their
//! replies (`orgs/messages.rs`) and do nothing else. A key is not a
//! [`Principal`]: it never acts as the user, an agent or anyone who could
//! read mail or the KB. Interfaces pass it as [`OrgCaller::Key`] with the
//! secret as presented, and every operation that takes one checks it (hash
//! known, not revoked, same agency) inside its own transaction.
//!
//! Only the BLAKE3 of the secret is stored; the secret (`agk_` + 64 hex
//! digits, 32 random bytes from the operating system) is shown once.

use agency_core::{OrgKeyId, Principal};
use agency_store::{OrgKeyRow, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Service, System, authenticate};
pub use agency_api::{MintedOrgKey, OrgKeyView};

const KEY_PREFIX: &str = "agk_";
/// Characters of the secret kept for display (`agk_` + 8 hex digits).
const SHOWN: usize = KEY_PREFIX.len() + 8;

/// Who talks to an agency from outside.
#[derive(Clone, PartialEq, Eq)]
pub enum OrgCaller {
    /// The user (the admin token): any agency.
    User,
    /// An agency API key, as presented: its own agency only.
    Key(String),
}

impl std::fmt::Debug for OrgCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret (logs end up in places).
        match self {
            OrgCaller::User => f.write_str("User"),
            OrgCaller::Key(_) => f.write_str("Key(…)"),
        }
    }
}

pub(crate) fn key_view(r: OrgKeyRow) -> OrgKeyView {
    OrgKeyView {
        id: r.id,
        agency: r.agency,
        prefix: r.prefix,
        created_at: r.created_at,
        revoked_at: r.revoked_at,
    }
}

fn hash(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

fn invalid_key() -> ServiceError {
    ServiceError::denied(
        "failed to authenticate: the API key is unknown or revoked; the user mints one with `agency key mint --agency NAME`",
    )
}

/// The live key a caller presents: `None` for the user; an unknown or
/// revoked key is refused.
fn live_key(tx: &mut dyn Tx, caller: &OrgCaller) -> Result<Option<OrgKeyRow>> {
    match caller {
        OrgCaller::User => Ok(None),
        OrgCaller::Key(secret) => {
            if !secret.starts_with(KEY_PREFIX) || secret.len() > 256 {
                return Err(invalid_key());
            }
            tx.org_key_by_hash(&hash(secret))?
                .filter(|k| k.revoked_at.is_none())
                .map(Some)
                .ok_or_else(invalid_key)
        }
    }
}

/// The agency a caller may talk to: `None` for the user (every agency),
/// the key's agency for a live key; an unknown or revoked key is refused.
pub(crate) fn org_scope(tx: &mut dyn Tx, caller: &OrgCaller) -> Result<Option<String>> {
    Ok(live_key(tx, caller)?.map(|k| k.agency))
}

/// Refuse a caller that may not `what` `agency`; the key it used, if
/// not the user (whose messages no per-key limit binds).
pub(crate) fn authenticate_org(
    tx: &mut dyn Tx,
    caller: &OrgCaller,
    agency: &str,
    what: &str,
) -> Result<Option<OrgKeyId>> {
    match live_key(tx, caller)? {
        Some(k) if k.agency != agency => Err(ServiceError::denied(format!(
            "failed to {what} agency {agency}: this API key is for agency {} only",
            k.agency
        ))),
        k => Ok(k.map(|k| k.id)),
    }
}

fn require_user(tx: &mut dyn Tx, who: Principal, what: &str) -> Result<()> {
    if !authenticate(tx, who)?.is_user() {
        return Err(ServiceError::denied(format!(
            "failed to {what}: only the user manages agency API keys"
        )));
    }
    Ok(())
}

fn new_secret() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        ServiceError::Store(agency_store::StoreError::backend(
            "read random bytes for an API key",
            e,
        ))
    })?;
    let mut s = String::with_capacity(KEY_PREFIX.len() + 64);
    s.push_str(KEY_PREFIX);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    Ok(s)
}

impl Service {
    /// The user mints an API key for `agency` (which must exist). The
    /// secret is in the answer only.
    pub fn org_key_mint(&self, who: Principal, agency: &str) -> Result<MintedOrgKey> {
        agency_core::validate::check_name("agency", agency)?;
        let key = new_secret()?;
        let prefix = key[..SHOWN].to_owned();
        let id = OrgKeyId::new_random();
        self.write(|op| {
            require_user(op.tx, who, "mint an API key")?;
            if crate::mail::org_reply::executive_of(op.tx, agency)?.is_none() {
                return Err(ServiceError::not_found("agency", agency));
            }
            op.tx.insert_org_key(&OrgKeyRow {
                id,
                agency: agency.to_owned(),
                key_hash: hash(&key),
                prefix: prefix.clone(),
                created_at: op.now,
                revoked_at: None,
            })?;
            Ok(MintedOrgKey {
                id,
                agency: agency.to_owned(),
                key: key.clone(),
                prefix: prefix.clone(),
            })
        })
    }

    /// The user lists keys (of one agency, or all), revoked ones too.
    pub fn org_key_list(&self, who: Principal, agency: Option<&str>) -> Result<Vec<OrgKeyView>> {
        if let Some(a) = agency {
            agency_core::validate::check_name("agency", a)?;
        }
        self.read(|tx| {
            require_user(tx, who, "list API keys")?;
            Ok(tx.org_keys(agency)?.into_iter().map(key_view).collect())
        })
    }

    /// The user revokes a key; it stops working at once. Whether it was
    /// live; an unknown id is not found.
    pub fn org_key_revoke(&self, who: Principal, id: OrgKeyId) -> Result<bool> {
        self.write(|op| {
            require_user(op.tx, who, "revoke an API key")?;
            if op.tx.org_key(id)?.is_none() {
                return Err(ServiceError::not_found("API key", id));
            }
            Ok(op.tx.revoke_org_key(id, op.now)?)
        })
    }
}

impl System {
    /// Interfaces: the agency a presented key is for, if it is live.
    /// Operations check the key again; this lets a guard refuse early.
    pub fn org_key_verify(&self, secret: &str) -> Result<String> {
        let caller = OrgCaller::Key(secret.to_owned());
        self.read(|tx| org_scope(tx, &caller))?
            .ok_or_else(invalid_key)
    }
}
