//! The captured output of agent runs: the daemon keeps each run's
//! stdout/stderr (bounded: head and tail, the cut marked) as a blob beside
//! the run record; the user reads any run's, an agent only its own
//! handler's (its predecessors' crashes are its business, another
//! handler's output is not).

use agency_core::{AgentId, Principal};

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Caller, Service, authenticate};
pub use agency_api::RunLog;

impl Service {
    /// The captured stdout/stderr of agent `agent`'s run. The user may read
    /// any run's; an agent only those of its own handler. Another
    /// handler's run is reported as not found, like a run that does not
    /// exist.
    pub fn agent_run_log(&self, who: Principal, agent: AgentId) -> Result<RunLog> {
        let (handler, blob) = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let row = tx
                .agent(agent)?
                .ok_or_else(|| ServiceError::not_found("agent run", agent))?;
            if let Caller::Handler { row: own, .. } = &caller
                && own.id != row.handler
            {
                return Err(ServiceError::not_found("agent run", agent));
            }
            Ok((row.handler, tx.agent_run_log(agent)?))
        })?;
        let bytes = match &blob {
            Some(b) => self.blobs.get(b)?,
            None => Vec::new(),
        };
        Ok(RunLog {
            agent,
            handler,
            captured: blob.is_some(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}
