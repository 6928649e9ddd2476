//! Who is calling. Every service operation takes a [`Principal`] explicitly;
//! interfaces derive it from the caller's token, never from arguments.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, HandlerId};

/// The caller of a service operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Principal {
    /// The person running Agency: boss of the root handler.
    User,
    /// One agent instance acting for its handler.
    Agent { handler: HandlerId, agent: AgentId },
}

impl Principal {
    pub fn agent(handler: HandlerId, agent: AgentId) -> Self {
        Principal::Agent { handler, agent }
    }

    /// The handler acting, or `None` for the user.
    pub fn handler(&self) -> Option<HandlerId> {
        match self {
            Principal::User => None,
            Principal::Agent { handler, .. } => Some(*handler),
        }
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        match self {
            Principal::User => None,
            Principal::Agent { agent, .. } => Some(*agent),
        }
    }

    pub fn is_user(&self) -> bool {
        matches!(self, Principal::User)
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::User => f.write_str("user"),
            Principal::Agent { handler, agent } => write!(f, "handler {handler} (agent {agent})"),
        }
    }
}
