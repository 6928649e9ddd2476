//! [`UsageTx`]: model calls: the gateway's metering.

use agency_core::{AgentId, HandlerId};

use super::R;
use crate::model::{ModelCallRow, UsageTotals};

/// Model calls: the gateway's metering.
pub trait UsageTx {
    fn insert_model_call(&mut self, call: &ModelCallRow) -> R<()>;
    /// The sums of the model calls of each handler given (one aggregate
    /// per handler over its index), in the order given; a handler without
    /// calls gets zeros.
    fn model_usage_of(&mut self, handlers: &[HandlerId]) -> R<Vec<UsageTotals>>;
    /// The latest model calls of an agent, newest first, at most `limit`.
    fn model_calls_of_agent(&mut self, agent: AgentId, limit: usize) -> R<Vec<ModelCallRow>>;
}
