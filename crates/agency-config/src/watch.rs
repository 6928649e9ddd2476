//! `[watch]`: when Agency calls a signal a problem (`agency problems`, the
//! dashboard's "needs you") and how often the daemon looks.

use serde::{Deserialize, Serialize};

/// The `[watch]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// A handler with work and no progress for this long is stuck.
    pub stuck_after_minutes: u32,
    /// An approval pending this long is stale.
    pub approval_stale_after_minutes: u32,
    /// The daemon looks for problems this often.
    pub tick_seconds: u32,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            stuck_after_minutes: 15,
            approval_stale_after_minutes: 30,
            tick_seconds: 30,
        }
    }
}

/// Refuse what cannot work: a zero would flag everything at once, or look
/// without pause.
pub(crate) fn validate(w: &WatchConfig) -> Result<(), String> {
    for (key, v) in [
        ("stuck_after_minutes", w.stuck_after_minutes),
        (
            "approval_stale_after_minutes",
            w.approval_stale_after_minutes,
        ),
        ("tick_seconds", w.tick_seconds),
    ] {
        if v == 0 {
            return Err(format!("watch.{key} must be at least 1"));
        }
    }
    if w.tick_seconds > 3600 {
        return Err(format!(
            "watch.tick_seconds = {} is out of range (1 to 3600)",
            w.tick_seconds
        ));
    }
    Ok(())
}

impl WatchConfig {
    /// The service's settings.
    pub fn service(&self) -> agency_service::Watch {
        agency_service::Watch {
            stuck_after_ms: i64::from(self.stuck_after_minutes) * 60_000,
            approval_stale_after_ms: i64::from(self.approval_stale_after_minutes) * 60_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_huge_values_are_refused_with_the_key_named() {
        assert_eq!(validate(&WatchConfig::default()), Ok(()));
        let cases = [
            (
                WatchConfig {
                    stuck_after_minutes: 0,
                    ..WatchConfig::default()
                },
                "watch.stuck_after_minutes",
            ),
            (
                WatchConfig {
                    approval_stale_after_minutes: 0,
                    ..WatchConfig::default()
                },
                "watch.approval_stale_after_minutes",
            ),
            (
                WatchConfig {
                    tick_seconds: 0,
                    ..WatchConfig::default()
                },
                "watch.tick_seconds",
            ),
            (
                WatchConfig {
                    tick_seconds: 3601,
                    ..WatchConfig::default()
                },
                "watch.tick_seconds = 3601",
            ),
        ];
        for (w, named) in cases {
            let e = validate(&w).unwrap_err();
            assert!(e.contains(named), "{e}");
        }
        assert_eq!(
            WatchConfig {
                stuck_after_minutes: 2,
                ..WatchConfig::default()
            }
            .service()
            .stuck_after_ms,
            120_000
        );
    }
}
