//! Reading a source folder from disk into [`RawFolder`]s (seed 002 §4): one
//! `.agency` (or seed 004's `agents.json`) per folder, its `.agent` and
//! `.tool` files, and sub-agency subfolders. This is the only module that
//! touches the filesystem; everything after it works on the parsed files.

use std::fs;
use std::path::{Path, PathBuf};

use crate::assist::Assist;
use crate::diag::{Diags, Pos};
use crate::model::{CommandTool, ToolImplementation, default_tool_timeout_ms};
use crate::raw::{RawFolder, RawTool, S, rel_join};
use crate::{agency, agent, agents_json, tool};

/// A source file larger than this is refused (sources are prose).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Sub-agencies nested deeper than this are refused.
pub const MAX_NESTING: usize = 16;
/// At most this many source files in a tree.
pub const MAX_FILES: usize = 5_000;

/// What was read: the folder tree and every source file's relative path
/// and bytes (for `metadata.sourceHash`).
#[derive(Debug, Default)]
pub struct Read {
    pub root: Option<RawFolder>,
    pub files: Vec<(String, Vec<u8>)>,
}

struct Walker<'a> {
    diags: &'a mut Diags,
    assist: Option<&'a dyn Assist>,
    files: Vec<(String, Vec<u8>)>,
    /// The folders being read (canonical path, agency name), root first.
    ancestors: Vec<(PathBuf, String)>,
}

pub fn read_tree(root: &Path, diags: &mut Diags, assist: Option<&dyn Assist>) -> Read {
    let mut w = Walker {
        diags,
        assist,
        files: Vec::new(),
        ancestors: Vec::new(),
    };
    let folder_name = fs::canonicalize(root)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "agency".to_owned());
    let root = w.folder(root, "", &folder_name);
    let mut files = w.files;
    files.sort();
    Read { root, files }
}

/// What a folder holds, by kind, sorted by name.
#[derive(Default)]
struct Listing {
    agency: Vec<String>,
    agents: Vec<String>,
    tools: Vec<String>,
    agents_json: bool,
    dirs: Vec<String>,
    other: Vec<String>,
}

fn list(dir: &Path) -> std::io::Result<Listing> {
    let mut names: Vec<(String, bool)> = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        // Follows symlinks, so a linked folder is a folder (cycles are caught).
        let is_dir = fs::metadata(e.path()).map(|m| m.is_dir()).unwrap_or(false);
        names.push((name, is_dir));
    }
    names.sort();
    let mut l = Listing::default();
    for (name, is_dir) in names {
        if name.starts_with('.') {
            continue;
        }
        if is_dir {
            l.dirs.push(name);
        } else if name.ends_with(".agency") {
            l.agency.push(name);
        } else if name.ends_with(".agent") {
            l.agents.push(name);
        } else if name.ends_with(".tool") {
            l.tools.push(name);
        } else if name == "agents.json" {
            l.agents_json = true;
        } else {
            l.other.push(name);
        }
    }
    Ok(l)
}

fn stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(s, _)| s)
}

impl Walker<'_> {
    fn where_(dir: &str) -> String {
        if dir.is_empty() {
            ".".to_owned()
        } else {
            dir.to_owned()
        }
    }

    /// A file's text, recorded for the hash; `None` (reported) if unreadable.
    fn text(&mut self, abs: &Path, rel: &str) -> Option<String> {
        if self.files.len() >= MAX_FILES {
            self.diags.error(
                rel,
                Pos::start(),
                format!("failed to read {rel}: the sources hold more than {MAX_FILES} files"),
            );
            return None;
        }
        let meta = fs::metadata(abs).ok()?;
        if meta.len() > MAX_FILE_BYTES {
            self.diags.error(
                rel,
                Pos::start(),
                format!("failed to read {rel}: it is larger than {MAX_FILE_BYTES} bytes"),
            );
            return None;
        }
        let bytes = match fs::read(abs) {
            Ok(b) => b,
            Err(e) => {
                self.diags
                    .error(rel, Pos::start(), format!("failed to read {rel}: {e}"));
                return None;
            }
        };
        self.files.push((rel.to_owned(), bytes.clone()));
        match String::from_utf8(bytes) {
            Ok(t) => Some(t.replace("\r\n", "\n")),
            Err(e) => {
                self.diags.error(
                    rel,
                    Pos::start(),
                    format!(
                        "failed to read {rel}: not UTF-8 text (byte {})",
                        e.utf8_error().valid_up_to()
                    ),
                );
                None
            }
        }
    }

    fn folder(&mut self, abs: &Path, rel: &str, folder_name: &str) -> Option<RawFolder> {
        let here = Self::where_(rel);
        let listing = match list(abs) {
            Ok(l) => l,
            Err(e) => {
                self.diags.error(
                    &here,
                    Pos::start(),
                    format!("failed to read folder {here}: {e}"),
                );
                return None;
            }
        };
        let mut f = RawFolder {
            dir: rel.to_owned(),
            ..RawFolder::default()
        };
        for extra in listing.agency.iter().skip(1) {
            let first = rel_join(rel, &listing.agency[0]);
            self.diags.error(
                &rel_join(rel, extra),
                Pos::start(),
                format!("a folder holds one .agency file, and {first} is already this folder's"),
            );
        }
        let mut exec: Vec<S<String>> = Vec::new();
        if let Some(name) = listing.agency.first() {
            let file = rel_join(rel, name);
            let text = self.text(&abs.join(name), &file)?;
            let (g, e) = agency::read(&file, stem(name), &text, self.diags, self.assist);
            f.agency = g;
            exec = e;
            if listing.agents_json {
                self.diags.error(&rel_join(rel, "agents.json"), Pos::start(), format!("a folder holds an .agency file or an agents.json, not both ({file} is this folder's agency)"));
            }
        } else if listing.agents_json {
            let file = rel_join(rel, "agents.json");
            let text = self.text(&abs.join("agents.json"), &file)?;
            let (g, mut agents, e) = agents_json::read(&file, folder_name, &text, self.diags);
            f.agency = g;
            exec.extend(e);
            self.script_tools(abs, rel, &mut agents, &listing, &mut f.tools);
            f.agents = agents;
        } else {
            self.diags.error(&here, Pos::start(), "the source folder has no .agency file (or agents.json): nothing says which agency this is");
            return None;
        }
        for name in &listing.agents {
            let file = rel_join(rel, name);
            if let Some(text) = self.text(&abs.join(name), &file) {
                f.agents.extend(agent::read(
                    &file,
                    stem(name),
                    &text,
                    self.diags,
                    self.assist,
                ));
            }
        }
        for name in &listing.tools {
            let file = rel_join(rel, name);
            if let Some(text) = self.text(&abs.join(name), &file) {
                f.tools.extend(tool::read(
                    &file,
                    stem(name),
                    &text,
                    self.diags,
                    self.assist,
                ));
            }
        }
        // The executive: the first candidate naming an agent of the folder.
        f.agency.executive = exec
            .iter()
            .find(|c| f.agents.iter().any(|a| a.name.v == c.v))
            .or(exec.first())
            .cloned()
            .or_else(|| match f.agents.as_slice() {
                [only] => Some(S::new(only.name.v.clone(), f.agency.name.pos)),
                _ => None,
            });
        let canonical = fs::canonicalize(abs).unwrap_or_else(|_| abs.to_path_buf());
        self.ancestors.push((canonical, f.agency.name.v.clone()));
        for d in &listing.dirs {
            self.subfolder(abs, rel, d, &mut f);
        }
        self.ancestors.pop();
        Some(f)
    }

    fn subfolder(&mut self, abs: &Path, rel: &str, d: &str, f: &mut RawFolder) {
        let sub_abs = abs.join(d);
        let sub_rel = rel_join(rel, d);
        let Ok(sub_listing) = list(&sub_abs) else {
            self.diags.error(
                &sub_rel,
                Pos::start(),
                format!("failed to read folder {sub_rel}"),
            );
            return;
        };
        let defines = !sub_listing.agency.is_empty() || sub_listing.agents_json;
        if !defines {
            if !sub_listing.agents.is_empty() || !sub_listing.tools.is_empty() {
                self.diags.error(&sub_rel, Pos::start(), format!("folder {sub_rel} has agents or tools but no .agency file (or agents.json) to say which agency they belong to"));
            }
            return;
        }
        let canonical = fs::canonicalize(&sub_abs).unwrap_or_else(|_| sub_abs.clone());
        if let Some(i) = self.ancestors.iter().position(|(p, _)| *p == canonical) {
            let mut chain: Vec<&str> = self.ancestors[i..]
                .iter()
                .map(|(_, n)| n.as_str())
                .collect();
            chain.push(&self.ancestors[i].1);
            self.diags.error(&sub_rel, Pos::start(), format!("sub-agency cycle: {} (folder {sub_rel} leads back to an enclosing agency's folder)", chain.join(" -> ")));
            return;
        }
        if self.ancestors.len() >= MAX_NESTING {
            self.diags.error(
                &sub_rel,
                Pos::start(),
                format!("sub-agencies nest deeper than {MAX_NESTING} levels"),
            );
            return;
        }
        if let Some(child) = self.folder(&sub_abs, &sub_rel, d) {
            f.children.push(child);
        }
    }

    /// Seed 004's tool scripts (`"tools": ["airtable.py"]`) as command
    /// tools named by the script's stem (`airtable`: an MCP tool name has
    /// no `.`), when the script is in the folder (or its `tools/`) and no
    /// `.tool` file of the folder defines that name. The agents' lists
    /// are rewritten to the stem.
    fn script_tools(
        &mut self,
        abs: &Path,
        rel: &str,
        agents: &mut [crate::raw::RawAgent],
        listing: &Listing,
        out: &mut Vec<RawTool>,
    ) {
        let defined: Vec<&str> = listing.tools.iter().map(|t| stem(t)).collect();
        for a in agents.iter_mut() {
            for t in a.tools.iter_mut().flat_map(|t| t.v.iter_mut()) {
                if defined.contains(&t.v.as_str()) {
                    continue;
                }
                let script = stem(&t.v).to_owned();
                if script != t.v && out.iter().any(|o| o.name.v == script) {
                    t.v = script;
                    continue;
                }
                let path = if listing.other.contains(&t.v) {
                    t.v.clone()
                } else if abs.join("tools").join(&t.v).is_file() {
                    format!("tools/{}", t.v)
                } else {
                    continue; // a name: resolved (or reported) with the others
                };
                let mut name = t.clone();
                name.v = stem(&t.v).to_owned();
                t.v = name.v.clone();
                out.push(RawTool {
                    file: rel_join(rel, "agents.json"),
                    name,
                    description: format!("Runs {path} in the folder of agents.json: JSON in on stdin, JSON out on stdout."),
                    implementation: Some(ToolImplementation::Command(CommandTool {
                        command: agents_json::script_command(&path),
                        timeout_ms: default_tool_timeout_ms(),
                        env: Default::default(),
                        dir: None,
                    })),
                    input: None,
                    output: None,
                    egress: Vec::new(),
                });
            }
        }
    }
}
