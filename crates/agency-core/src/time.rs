//! Timestamps as milliseconds since the Unix epoch (UTC). The service layer
//! passes the time in (it owns the clock) so that rules stay pure and tests
//! can move time forward, e.g. to make deferred mail fall due.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub fn millis(self) -> i64 {
        self.0
    }

    pub fn plus_millis(self, ms: i64) -> Self {
        Timestamp(self.0.saturating_add(ms))
    }

    /// RFC 3339 with millisecond precision, e.g. `2026-11-22T03:23:29.000Z`.
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(t) => {
                let (h, m, s, ms) = t.time().as_hms_milli();
                format!(
                    "{:04}-{:02}-{:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z",
                    t.year(),
                    u8::from(t.month()),
                    t.day()
                )
            }
            Err(_) => format!("@{}ms", self.0),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_795_000_000_123).to_rfc3339(),
            "2026-11-18T11:06:40.123Z"
        );
    }
}
