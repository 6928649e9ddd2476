//! `GET /v1/kb/{id}`: a Knowledge Base file's content for display.

use agency_core::access::FileKind;
use agency_core::status::KbAction;
use agency_core::{AgentId, HandlerId};
use agency_core::{FileId, Level, Timestamp};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A KB file at one version, without its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    pub id: FileId,
    pub kind: FileKind,
    pub description: String,
    pub version: i64,
    /// The content's hash (`blake3:…`).
    pub hash: String,
    pub created_at: Timestamp,
}

/// `GET /v1/kb/{id}`: a file's content for display, exact bytes included
/// when it is not text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileText {
    #[serde(flatten)]
    pub meta: FileMeta,
    /// The content as text (invalid UTF-8 replaced by U+FFFD).
    pub text: String,
    /// True when the content is not valid UTF-8.
    pub binary: bool,
    /// The exact bytes, base64 (standard alphabet), when `binary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

impl FileText {
    pub fn new(meta: FileMeta, content: &[u8]) -> FileText {
        let binary = std::str::from_utf8(content).is_err();
        let content_base64 =
            binary.then(|| base64::engine::general_purpose::STANDARD.encode(content));
        FileText {
            text: String::from_utf8_lossy(content).into_owned(),
            binary,
            content_base64,
            meta,
        }
    }

    /// The exact content: decoded from base64 for binary files.
    pub fn bytes(&self) -> Vec<u8> {
        match &self.content_base64 {
            Some(b) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .unwrap_or_default(),
            None => self.text.as_bytes().to_vec(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn meta() -> FileMeta {
        FileMeta {
            id: FileId(uuid::Uuid::from_u128(1)),
            kind: FileKind::Document,
            description: "d".into(),
            version: 1,
            hash: "blake3:00".into(),
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn binary_content_round_trips_through_json() {
        for bytes in [&b"plain text\n"[..], &[0xff, 0x00, 0xfe, b'a'][..]] {
            let json = serde_json::to_string(&FileText::new(meta(), bytes)).unwrap();
            let back: FileText = serde_json::from_str(&json).unwrap();
            assert_eq!(back.bytes(), bytes);
            assert_eq!(back.binary, std::str::from_utf8(bytes).is_err());
        }
    }
}

/// A KB file as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    pub id: FileId,
    pub kind: FileKind,
    pub description: String,
    /// The caller's level.
    pub level: Level,
    pub latest_version: i64,
}

/// One entry of a KB file's access log. `handler == None` is the user (or
/// Agency itself when `agent` is also `None` and the action is a system write).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbAuditEntry {
    pub file: FileId,
    pub at: Timestamp,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub action: KbAction,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub file: FileId,
    pub version: i64,
    pub hash: String,
    pub size: i64,
    pub created_at: Timestamp,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
}
