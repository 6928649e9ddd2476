//! Response types of the REST API that are not service views, shared by the
//! daemon (which writes them) and the CLI (which reads them).

use agency_core::HandlerId;
use agency_service::{AgentRow, FileContent, StoreCounts};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// `GET /v1/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusView {
    pub version: String,
    pub home: String,
    pub addr: String,
    pub pid: u32,
    pub root_handler: Option<HandlerId>,
    pub counts: StoreCounts,
    /// `agents.runtime`: `none` means no agent is ever started, so nothing
    /// answers mail until one is configured.
    #[serde(default)]
    pub runtime: String,
    /// Whether agents run confined: `on`, `off` (`agents.sandbox = "off"`,
    /// agents run unconfined) or `unavailable: CAUSE` (none can start).
    #[serde(default)]
    pub sandbox: String,
    /// With the sandbox on: the limits every agent runs under and what
    /// keeps each (issue 27); empty otherwise.
    #[serde(default)]
    pub limits: Vec<LimitView>,
    /// Every paused budget: no agent starts in its handler's subtree until
    /// the user raises the limit or resumes it.
    #[serde(default)]
    pub paused: Vec<agency_service::PausedView>,
}

/// One resource limit of every confined agent (`GET /v1/status`
/// `limits`): how much, of what, for which processes, kept by what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitView {
    pub resource: LimitResource,
    /// In the unit `resource` names.
    pub value: u64,
    pub scope: LimitScope,
    /// What keeps it: `cgroup v1 memory`, `cgroup v2 pids`,
    /// `RLIMIT_DATA`, …
    pub enforced_by: String,
}

/// What a [`LimitView`] bounds, with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitResource {
    MemoryMib,
    Processes,
    CpuSeconds,
    FileSizeMib,
    OpenFiles,
}

/// Whom a [`LimitView`] bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitScope {
    /// The agent and all its descendants together.
    AgentTree,
    /// Each process alone.
    Process,
}

impl LimitView {
    /// `memory 8192 MiB per agent tree (cgroup v1 memory)`.
    pub fn describe(&self) -> String {
        let v = self.value;
        let what = match self.resource {
            LimitResource::MemoryMib => format!("memory {v} MiB"),
            LimitResource::Processes => format!("processes {v}"),
            LimitResource::CpuSeconds => format!("CPU time {v} s"),
            LimitResource::FileSizeMib => format!("file size {v} MiB"),
            LimitResource::OpenFiles => format!("open files {v}"),
        };
        let scope = match self.scope {
            LimitScope::AgentTree => "per agent tree",
            LimitScope::Process => "per process",
        };
        format!("{what} {scope} ({})", self.enforced_by)
    }
}

/// `GET /v1/agents`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentsView {
    pub live: Vec<AgentRow>,
    pub recent: Vec<AgentRow>,
}

/// `GET /v1/kb/{id}`: a file's content for display, exact bytes included
/// when it is not text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileText {
    #[serde(flatten)]
    pub meta: FileContent,
    /// The content as text (invalid UTF-8 replaced by U+FFFD).
    pub text: String,
    /// True when the content is not valid UTF-8.
    pub binary: bool,
    /// The exact bytes, base64 (standard alphabet), when `binary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

impl FileText {
    pub fn new(c: FileContent) -> FileText {
        let binary = std::str::from_utf8(&c.content).is_err();
        let content_base64 =
            binary.then(|| base64::engine::general_purpose::STANDARD.encode(&c.content));
        FileText {
            text: c.text(),
            binary,
            content_base64,
            meta: c,
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

    fn content(bytes: &[u8]) -> FileContent {
        FileContent {
            id: agency_core::FileId::new_random(),
            kind: agency_core::access::FileKind::Document,
            description: "d".into(),
            version: 1,
            hash: agency_store::BlobId::of(bytes),
            created_at: agency_core::Timestamp(0),
            content: bytes.to_vec(),
        }
    }

    #[test]
    fn binary_content_round_trips_through_json() {
        for bytes in [&b"plain text\n"[..], &[0xff, 0x00, 0xfe, b'a'][..]] {
            let json = serde_json::to_string(&FileText::new(content(bytes))).unwrap();
            let back: FileText = serde_json::from_str(&json).unwrap();
            assert_eq!(back.bytes(), bytes);
            assert_eq!(back.binary, std::str::from_utf8(bytes).is_err());
        }
    }
}
