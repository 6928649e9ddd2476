//! Warm agents (seed 004's option C): how long a
//! handler's agent stays alive after its work is done, waiting for mail
//! without a model call, and what the `mail_wait` tool reads.
//!
//! The time comes from, in order: the user's setting (`agency keep-warm`,
//! source `user`), the organisation's `memory.keepWarm` (written by `agency
//! up`, source `org`), else the daemon's `[agents]` default (one for an
//! organisation's executive handler, one for every other handler). Only
//! the user sets one: a warm agent holds one of the daemon's slots.

use std::time::Duration;

use agency_core::{HandlerId, MessageId, Principal};
use agency_store::Tx;

use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Op, Service, System, authenticate};
use crate::{Result, ServiceError};
pub use agency_api::{KeepWarmView, MailHeader};

/// The longest keep-warm time accepted (24 h): past that a parked agent is
/// a daemon rather than an agent.
pub const MAX_KEEP_WARM_MS: u64 = 24 * 3_600_000;

/// The daemon's defaults (`[agents] keep_warm_ms`, `keep_warm_executive_ms`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepWarmDefaults {
    /// Every handler without a setting of its own.
    pub default_ms: u64,
    /// An organisation's executive handler without a setting of its own.
    pub executive_ms: u64,
}

/// What the user asks `agency keep-warm` for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepWarmSetting {
    /// Stay warm this long (`0` is the same as `Off`).
    For(u64),
    /// Never stay warm, whatever the organisation or the defaults say.
    Off,
    /// Remove the user's setting: the organisation's, else the default.
    Default,
}

impl KeepWarmSetting {
    /// `5m`, `90s`, `1h30m`, `500ms`; `off`; `default`.
    pub fn parse(s: &str) -> Result<KeepWarmSetting> {
        match s.trim() {
            "off" | "0" => return Ok(KeepWarmSetting::Off),
            "default" => return Ok(KeepWarmSetting::Default),
            _ => {}
        }
        let ms = crate::duration::duration_ms(s).ok_or_else(|| {
            ServiceError::invalid(format!(
                "failed to read the keep-warm time {s:?}: expected a duration such as 90s, 5m or 1h30m, `off` or `default`"
            ))
        })?;
        let ms = check_ms(s, ms)?;
        Ok(if ms == 0 {
            KeepWarmSetting::Off
        } else {
            KeepWarmSetting::For(ms)
        })
    }
}

/// A duration's milliseconds, refused past [`MAX_KEEP_WARM_MS`].
fn check_ms(s: &str, ms: i64) -> Result<u64> {
    match u64::try_from(ms) {
        Ok(ms) if ms <= MAX_KEEP_WARM_MS => Ok(ms),
        _ => Err(ServiceError::invalid(format!(
            "failed to read the keep-warm time {s:?}: it is longer than the 24 h allowed"
        ))),
    }
}

impl Service {
    /// The user: set how long `handler`'s agent stays warm, turn it off,
    /// or go back to the organisation's or the default.
    pub fn keep_warm_set(
        &self,
        who: Principal,
        handler: HandlerId,
        setting: KeepWarmSetting,
        defaults: KeepWarmDefaults,
    ) -> Result<KeepWarmView> {
        self.write(|op| {
            if !matches!(authenticate(op.tx, who)?, Caller::User) {
                return Err(ServiceError::denied(format!(
                    "failed to set the keep-warm time of handler {handler}: only the user sets it"
                )));
            }
            if op.tx.handler(handler)?.is_none() {
                return Err(ServiceError::not_found("handler", handler));
            }
            let (ms, summary) = match setting {
                KeepWarmSetting::For(ms) => (
                    Some(ms_i64(ms)),
                    format!("keep-warm time set to {ms} ms by the user"),
                ),
                KeepWarmSetting::Off => (Some(0), "keep-warm turned off by the user".to_owned()),
                KeepWarmSetting::Default => (
                    None,
                    "keep-warm setting removed by the user (organisation's or default again)"
                        .to_owned(),
                ),
            };
            op.tx.set_handler_keep_warm(handler, "user", ms, op.now)?;
            log(op, handler, None, summary)?;
            op.emit(crate::Event::KeepWarmChanged { handler });
            render_audit_log_file(op, handler, Author::default())?;
            keep_warm_view(op.tx, handler, defaults)
        })
    }

    /// The user: `handler`'s keep-warm settings and the one that holds.
    pub fn keep_warm_show(
        &self,
        who: Principal,
        handler: HandlerId,
        defaults: KeepWarmDefaults,
    ) -> Result<KeepWarmView> {
        self.read(|tx| {
            if !matches!(authenticate(tx, who)?, Caller::User) {
                return Err(ServiceError::denied(format!(
                    "failed to read the keep-warm time of handler {handler}: only the user may"
                )));
            }
            if tx.handler(handler)?.is_none() {
                return Err(ServiceError::not_found("handler", handler));
            }
            keep_warm_view(tx, handler, defaults)
        })
    }

    /// An agent (`mail_wait`): its handler's delivered, unacknowledged
    /// messages, oldest first, without those in `known`; refused once the
    /// agent has ended (a revoked token), which ends a wait.
    pub fn mail_waiting(
        &self,
        who: Principal,
        known: &[MessageId],
        limit: usize,
    ) -> Result<Vec<MailHeader>> {
        self.read(|tx| {
            let me = authenticate(tx, who)?.party();
            // `known` is bounded by the tool; the inbox page by `limit`
            // plus what is skipped, so a long known list still finds news.
            let rows = tx.inbox(me, limit.saturating_add(known.len()))?;
            Ok(rows
                .into_iter()
                .filter(|m| !known.contains(&m.id))
                .take(limit)
                .map(|m| MailHeader {
                    id: m.id,
                    from: m.from,
                    subject: m.subject,
                })
                .collect())
        })
    }
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The precedence, as one pure function (unit-tested): user > org >
/// (executive ? executive default : default).
pub(crate) fn effective(
    user: Option<u64>,
    org: Option<u64>,
    executive: bool,
    d: KeepWarmDefaults,
) -> (u64, agency_api::KeepWarmSource) {
    use agency_api::KeepWarmSource as S;
    match (user, org) {
        (Some(u), _) => (u, S::User),
        (None, Some(o)) => (o, S::Org),
        (None, None) if executive => (d.executive_ms, S::ExecutiveDefault),
        (None, None) => (d.default_ms, S::Default),
    }
}

pub(crate) fn keep_warm_view(
    tx: &mut dyn Tx,
    handler: HandlerId,
    d: KeepWarmDefaults,
) -> Result<KeepWarmView> {
    let rows = tx.handler_keep_warm(handler)?;
    let of = |source: &str| {
        rows.iter()
            .find(|(s, _)| s == source)
            .map(|(_, ms)| u64::try_from(*ms).unwrap_or(0))
    };
    let (user_ms, org_ms) = (of("user"), of("org"));
    // An organisation that is up and whose executive this handler is.
    let executive = tx
        .orgs()?
        .iter()
        .any(|o| o.executive == handler && o.retired_at.is_none());
    let (effective_ms, source) = effective(user_ms, org_ms, executive, d);
    Ok(KeepWarmView {
        handler,
        user_ms,
        org_ms,
        executive,
        effective_ms,
        source,
    })
}

/// `agency up`: write (or remove) the organisation's keep-warm time of
/// `handler` from its agent's `memory.keepWarm`. A value the model's
/// checks let through but that is out of range is refused here.
pub(crate) fn org_keep_warm_sync(
    op: &mut Op<'_>,
    handler: HandlerId,
    v: Option<&str>,
) -> Result<()> {
    let ms = match v {
        None => None,
        Some(s) => {
            let ms = crate::duration::duration_ms(s).ok_or_else(|| {
                ServiceError::invalid(format!(
                    "failed to read memory.keepWarm {s:?}: expected a duration such as 90s, 5m or 1h30m"
                ))
            })?;
            Some(ms_i64(check_ms(s, ms)?))
        }
    };
    let cur = op
        .tx
        .handler_keep_warm(handler)?
        .into_iter()
        .find(|(s, _)| s == "org")
        .map(|(_, ms)| ms);
    if cur != ms {
        op.tx.set_handler_keep_warm(handler, "org", ms, op.now)?;
    }
    Ok(())
}

impl System {
    /// Daemon (the supervisor, at spawn): how long `handler`'s agent stays
    /// warm after its work is done; `None`: it exits.
    pub fn keep_warm_effective(
        &self,
        handler: HandlerId,
        defaults: KeepWarmDefaults,
    ) -> Result<Option<Duration>> {
        self.read(|tx| {
            let ms = keep_warm_view(tx, handler, defaults)?.effective_ms;
            Ok((ms > 0).then(|| Duration::from_millis(ms)))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const D: KeepWarmDefaults = KeepWarmDefaults {
        default_ms: 0,
        executive_ms: 300_000,
    };

    #[test]
    fn the_user_wins_over_the_organisation_over_the_defaults() {
        use agency_api::KeepWarmSource as S;
        assert_eq!(effective(Some(1), Some(2), true, D), (1, S::User));
        // Off by the user is off, even for an executive with an org value.
        assert_eq!(effective(Some(0), Some(2), true, D), (0, S::User));
        assert_eq!(effective(None, Some(2), true, D), (2, S::Org));
        assert_eq!(
            effective(None, None, true, D),
            (300_000, S::ExecutiveDefault)
        );
        assert_eq!(effective(None, None, false, D), (0, S::Default));
        let d = KeepWarmDefaults { default_ms: 7, ..D };
        assert_eq!(effective(None, None, false, d), (7, S::Default));
    }

    #[test]
    fn settings_parse_durations_off_and_default() {
        assert_eq!(
            KeepWarmSetting::parse("5m").unwrap(),
            KeepWarmSetting::For(300_000)
        );
        assert_eq!(
            KeepWarmSetting::parse("1h30m").unwrap(),
            KeepWarmSetting::For(5_400_000)
        );
        assert_eq!(
            KeepWarmSetting::parse("500ms").unwrap(),
            KeepWarmSetting::For(500)
        );
        assert_eq!(KeepWarmSetting::parse("off").unwrap(), KeepWarmSetting::Off);
        assert_eq!(KeepWarmSetting::parse("0s").unwrap(), KeepWarmSetting::Off);
        assert_eq!(
            KeepWarmSetting::parse("default").unwrap(),
            KeepWarmSetting::Default
        );
        assert_eq!(
            KeepWarmSetting::parse("24h").unwrap(),
            KeepWarmSetting::For(MAX_KEEP_WARM_MS)
        );
        let e = KeepWarmSetting::parse("25h").unwrap_err().to_string();
        assert!(e.contains("longer than the 24 h"), "{e}");
        let e = KeepWarmSetting::parse("soon").unwrap_err().to_string();
        assert!(
            e.contains("failed to read the keep-warm time \"soon\""),
            "{e}"
        );
        assert!(KeepWarmSetting::parse("5").is_err());
    }
}
