//! `[agency_api]` in `agency.toml`: what bounds an outside
//! caller of `POST /v1/agency/messages`, per agency API key. How often a
//! key may post (a token bucket in the daemon's memory, `rate_limit.rs`)
//! and how many of its messages may wait for an answer at once (counted
//! in the store's transaction, `agency-service`'s `org_messages.rs`). The
//! user (the admin token, on the home's socket) is bound by neither.
//!
//! Every value is checked at load: 0 would refuse every message (the way
//! to stop a caller is to revoke its key), and a value past the bound
//! would be no limit in practice, which a setting must not pretend to be.

use serde::{Deserialize, Serialize};

/// `[agency_api]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgencyApiConfig {
    /// Messages one key may post per minute, on average.
    pub messages_per_minute: u32,
    /// Messages one key may post at once after a quiet spell (the size of
    /// its bucket, refilled at `messages_per_minute`).
    pub burst: u32,
    /// Messages of one key not yet answered, at most.
    pub max_pending_per_key: u32,
}

impl Default for AgencyApiConfig {
    fn default() -> Self {
        AgencyApiConfig {
            messages_per_minute: 30,
            burst: 10,
            max_pending_per_key: 20,
        }
    }
}

/// The largest value each key accepts.
const MAX_PER_MINUTE: u32 = 6_000;
const MAX_BURST: u32 = 1_000;
const MAX_PENDING: u32 = 10_000;

impl AgencyApiConfig {
    /// Refuse 0 and values past their bound; the message names the key.
    pub(crate) fn validate(&self) -> Result<(), String> {
        for (key, value, most) in [
            (
                "messages_per_minute",
                self.messages_per_minute,
                MAX_PER_MINUTE,
            ),
            ("burst", self.burst, MAX_BURST),
            ("max_pending_per_key", self.max_pending_per_key, MAX_PENDING),
        ] {
            if value == 0 {
                return Err(format!(
                    "agency_api.{key} = 0 would refuse every message from outside: set 1 to {most}; to stop one caller, revoke its key (`agency key revoke ID`)"
                ));
            }
            if value > most {
                return Err(format!(
                    "agency_api.{key} = {value} is out of range: set 1 to {most} (larger is no limit in practice)"
                ));
            }
        }
        Ok(())
    }

    /// The part the service keeps in the store's transaction.
    pub fn service_limits(&self) -> agency_service::OrgApiLimits {
        agency_service::OrgApiLimits {
            max_pending_per_key: u64::from(self.max_pending_per_key),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_reach_the_service() {
        let c = AgencyApiConfig::default();
        c.validate().unwrap();
        assert_eq!(c.service_limits().max_pending_per_key, 20);
        assert_eq!(
            agency_service::OrgApiLimits::default(),
            c.service_limits(),
            "the service's default is the configuration's"
        );
    }
}
