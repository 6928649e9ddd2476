//! [`HandlerSettingsTx`]: per-handler settings that other parts set: the
//! chosen model upstream, standing instructions, keep-warm times.

use agency_core::{HandlerId, Timestamp};

use super::R;

/// Per-handler settings that other parts set: the chosen model upstream,
/// standing instructions, keep-warm times.
pub trait HandlerSettingsTx {
    /// Set (`Some`) or clear (`None`) the model upstream chosen for a
    /// handler.
    fn set_handler_model(
        &mut self,
        handler: HandlerId,
        upstream: Option<&str>,
        at: Timestamp,
    ) -> R<()>;
    fn handler_model(&mut self, handler: HandlerId) -> R<Option<String>>;
    /// The nearest model upstream up `handler`'s chain of bosses, starting
    /// with its own: `(the handler it is set on, the upstream)`. One
    /// statement whatever the depth (on PostgreSQL a round trip per handler
    /// walked was most of a gateway call's token check); a boss cycle in
    /// corrupt data ends the walk, it does not loop.
    fn handler_model_up(&mut self, handler: HandlerId) -> R<Option<(HandlerId, String)>>;
    /// Set (`Some`) or clear (`None`) a handler's standing instructions.
    fn set_handler_standing(
        &mut self,
        handler: HandlerId,
        text: Option<&str>,
        at: Timestamp,
    ) -> R<()>;
    fn handler_standing(&mut self, handler: HandlerId) -> R<Option<String>>;
    /// Set (`Some`) or clear (`None`) how long `handler`'s agent stays
    /// warm, as `source` (`user` or `org`) gives it.
    fn set_handler_keep_warm(
        &mut self,
        handler: HandlerId,
        source: &str,
        ms: Option<i64>,
        at: Timestamp,
    ) -> R<()>;
    /// Every keep-warm time of `handler` as (source, ms), ordered by source.
    fn handler_keep_warm(&mut self, handler: HandlerId) -> R<Vec<(String, i64)>>;
}
