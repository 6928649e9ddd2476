//! Agency's types on the wire: what the REST API answers, what the CLI
//! prints with `--json` and what MCP tools return to agents. The daemon
//! and the MCP endpoint convert the service's views into these types
//! (`agency-service`'s `wire` module) and the CLI reads them back; nothing
//! here knows the store or the service, so renaming a column or a view's
//! field cannot change what clients and agents read. A change here is a
//! change of the API: the golden tests in `agency-daemon/tests/suite/golden`
//! show it.

mod agents;
mod kb;
mod status;

pub use agents::{Agent, AgentsView};
pub use kb::{FileMeta, FileText};
pub use status::{Counts, LimitResource, LimitScope, LimitView, PausedView, StatusView};
