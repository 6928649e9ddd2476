//! Access levels of seed 000: `None` < `Read` < `Write`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How far a handler may go with a resource.
///
/// `None` is a real level, not the absence of one: a handler with `None` on a
/// KB file knows the file exists (UUID and description) but may not read it.
/// A handler with no capability at all does not know the file exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    None,
    Read,
    Write,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Read => "read",
            Level::Write => "write",
        }
    }

    /// The integer stored in the capability table; ordered like the levels.
    pub fn as_i64(self) -> i64 {
        match self {
            Level::None => 0,
            Level::Read => 1,
            Level::Write => 2,
        }
    }

    pub fn from_i64(v: i64) -> Option<Level> {
        match v {
            0 => Some(Level::None),
            1 => Some(Level::Read),
            2 => Some(Level::Write),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Level::None),
            "read" => Ok(Level::Read),
            "write" => Ok(Level::Write),
            other => Err(format!(
                "unknown access level {other:?}: expected none, read or write"
            )),
        }
    }
}
