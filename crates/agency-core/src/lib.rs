//! Agency's domain: identifiers, statuses, capability algebra and access
//! decisions, as pure functions with no I/O.
//!
//! Everything here is deterministic and synchronous so that the rules of seed
//! 000 can be tested as tables of cases and property tests, independently of
//! any store. The service layer gathers facts from the store and asks this
//! crate for the decision; only this crate knows what the rules *are*.

pub mod access;
pub mod capability;
pub mod dag;
pub mod egress;
pub mod git_ref;
pub mod ids;
pub mod level;
pub mod outcome;
pub mod policy;
pub mod principal;
pub mod prompt;
pub mod render;
pub mod status;
pub mod time;
pub mod usage;
pub mod validate;

pub use access::{KbFacts, OutcomeAccess, OutcomeFacts, kb_access, outcome_access};
pub use capability::{
    GrantRefusal, HeldCap, MailTarget, Resource, ResourceKind, choose_grant_source,
};
pub use egress::{EgressPattern, EgressTarget};
pub use ids::{
    AgentId, CallId, CapabilityId, ConversationId, FileId, HandlerId, LessonId, MemoryCompactionId,
    MemoryId, MessageId, OrgKeyId, OrgMessageId, OutcomeId,
};
pub use level::Level;
pub use outcome::{OutcomeStatus, StatusChange, check_status_change};
pub use principal::Principal;
pub use time::Timestamp;
pub use validate::{InvalidInput, Limits};
