//! Typed identifiers. Every id is a UUID; the newtypes keep a handler id from
//! being passed where a file id is expected.
//!
//! A handler's id *is* its root outcome's UUID (seed 000, "Identity"), so
//! [`HandlerId`] and [`OutcomeId`] convert into each other explicitly.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh random (v4) id.
            pub fn new_random() -> Self {
                Self(Uuid::new_v4())
            }

            /// The underlying UUID.
            pub fn uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0.hyphenated())
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// A Knowledge Base file. Outcomes, messages, state documents and audit
    /// logs are KB files too, so their ids are also file ids.
    FileId
);
uuid_id!(
    /// An outcome; also the id of the outcome's Markdown KB file.
    OutcomeId
);
uuid_id!(
    /// A handler, identified by the UUID of its root outcome.
    HandlerId
);
uuid_id!(
    /// One ephemeral agent instance of a handler (used for auditing and for
    /// aiming control actions at exactly one instance).
    AgentId
);
uuid_id!(
    /// A mail envelope.
    MessageId
);
uuid_id!(
    /// A message an outside party sent to an agency through its API
    /// (`POST /v1/agency/messages`).
    OrgMessageId
);
uuid_id!(
    /// A thread of messages with one agency: each new message of it shows
    /// the executive handler the earlier exchange.
    ConversationId
);
uuid_id!(
    /// One typed call of an agent's verb (`agent_call`): the request and
    /// its one reply name it.
    CallId
);
uuid_id!(
    /// An agency's API key (its row; the secret itself is never stored).
    OrgKeyId
);
uuid_id!(
    /// One memory of a handler: a note its agents stored for
    /// later agents of the same handler.
    MemoryId
);
uuid_id!(
    /// One condensation of a handler's memory, which the
    /// user may undo.
    MemoryCompactionId
);
uuid_id!(
    /// A lesson a pipeline learned; also the id of the KB file that holds
    /// its versions.
    LessonId
);

impl HandlerId {
    /// The handler responsible for `root`, whose id is that outcome's UUID.
    pub fn from_root(root: OutcomeId) -> Self {
        Self(root.0)
    }

    /// The handler's root outcome.
    pub fn root(&self) -> OutcomeId {
        OutcomeId(self.0)
    }
}

impl LessonId {
    /// The KB file holding the lesson's versions (same UUID).
    pub fn file(&self) -> FileId {
        FileId(self.0)
    }
}

impl OutcomeId {
    /// The KB file that renders this outcome as Markdown (same UUID).
    pub fn file(&self) -> FileId {
        FileId(self.0)
    }
}

/// A capability row's id (store-assigned, monotonically increasing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CapabilityId(pub i64);

impl fmt::Display for CapabilityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cap-{}", self.0)
    }
}
