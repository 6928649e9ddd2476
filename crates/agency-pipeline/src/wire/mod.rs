//! The bodies of a structured call in the two APIs the gateway serves, and
//! the reading of their answers: [`anthropic`] (Messages API) and
//! [`openai`] (chat completions), each constrained where asked with the
//! schema [`constrain`] reduces to what the provider accepts.

pub mod anthropic;
pub mod constrain;
pub mod openai;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{ModelAnswer, StructuredRequest};

/// Which API an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApi {
    Anthropic,
    OpenAi,
}

impl WireApi {
    /// The path below `/model/NAME/` of a call.
    pub fn path(self) -> &'static str {
        match self {
            WireApi::Anthropic => "v1/messages",
            WireApi::OpenAi => "v1/chat/completions",
        }
    }

    /// The request body of `req` for the model id `model`.
    pub fn body(self, req: &StructuredRequest, model: &str) -> Value {
        match self {
            WireApi::Anthropic => anthropic::body(req, model),
            WireApi::OpenAi => openai::body(req, model),
        }
    }

    /// Read an answer's text, token counts and stop reason.
    pub fn parse(self, body: &[u8]) -> Result<ModelAnswer, String> {
        match self {
            WireApi::Anthropic => anthropic::parse(body),
            WireApi::OpenAi => openai::parse(body),
        }
    }
}
