//! `agency completions bash|zsh|fish` (clap_complete's scripts for every
//! command and option), `agency man` (the manual page, by clap_mangen,
//! from the same definitions as `--help`), and the hidden
//! `agency __complete-ids KIND` the bash and fish scripts call to complete
//! ids from the running daemon. No daemon (or any failure) completes no
//! ids and prints nothing: a completion must never spill errors onto the
//! user's command line.

use std::process::ExitCode;

use anyhow::Result;
use clap_complete::Shell;
use serde_json::Value;

use super::{Ctx, write_stdout};

/// The completion script for `shell`, with id completion where the shell
/// allows adding it simply (bash, fish).
pub fn completions(shell: Shell) -> Result<ExitCode> {
    let mut cmd = crate::cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agency", &mut out);
    match shell {
        Shell::Bash => out.extend_from_slice(BASH_IDS.as_bytes()),
        Shell::Fish => out.extend_from_slice(FISH_IDS.as_bytes()),
        _ => {}
    }
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The manual page (roff) on stdout: `agency man | man -l -`.
pub fn man() -> Result<ExitCode> {
    let mut out = Vec::new();
    clap_mangen::Man::new(crate::cli::command()).render(&mut out)?;
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The ids of `kind` (handler, outcome, agent, file) the daemon knows, one
/// a line, for completion; nothing when no daemon answers.
pub fn complete_ids(ctx: &Ctx, kind: &str) -> Result<ExitCode> {
    if let Ok(ids) = ids(ctx, kind) {
        let mut text = String::new();
        for id in ids {
            text.push_str(&id);
            text.push('\n');
        }
        // A closed pipe is the shell's business, not an error to report.
        let _ = write_stdout(text.as_bytes());
    }
    Ok(ExitCode::SUCCESS)
}

fn ids(ctx: &Ctx, kind: &str) -> Result<Vec<String>> {
    let c = ctx.client()?;
    let list: Vec<Value> = match kind {
        "handler" => array(c.get(c.url(&["handlers"]))?),
        "outcome" => {
            let mut url = c.url(&["outcomes"]);
            url.query_pairs_mut().append_pair("limit", "1000");
            array(c.get(url)?.get("outcomes").cloned().unwrap_or_default())
        }
        "agent" => {
            let v = c.get(c.url(&["agents"]))?;
            let mut all = array(v.get("live").cloned().unwrap_or_default());
            all.extend(array(v.get("recent").cloned().unwrap_or_default()));
            all
        }
        "file" => {
            let mut url = c.url(&["kb"]);
            url.query_pairs_mut().append_pair("limit", "1000");
            array(c.get(url)?)
        }
        _ => Vec::new(),
    };
    let mut ids: Vec<String> = list
        .iter()
        .filter_map(|v| v.get("id").and_then(Value::as_str))
        // Only what an id can be: nothing else reaches the shell.
        .filter(|id| id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

fn array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        _ => Vec::new(),
    }
}

/// Bash: clap's `_agency`, then the daemon's ids for the first argument of
/// the commands that take one (the same `--home` passed along).
const BASH_IDS: &str = r#"
# Ids from the running daemon (`agency __complete-ids KIND`; none without one).
_agency_ids() {
    _agency "$@"
    local i=1 word home=() sub="" sub2="" pos=0
    while [[ $i -lt $COMP_CWORD ]]; do
        word="${COMP_WORDS[i]}"
        case "$word" in
            --home) home=(--home "${COMP_WORDS[i+1]}"); i=$((i + 2)); continue ;;
            -*) ;;
            *) if [[ -z $sub ]]; then sub=$word
               elif [[ -z $sub2 && $sub =~ ^(kb|outcome|memory|budget|model|token)$ ]]; then sub2=$word
               else pos=$((pos + 1)); fi ;;
        esac
        i=$((i + 1))
    done
    local cur="${COMP_WORDS[COMP_CWORD]}" kind=""
    [[ $pos -eq 0 && $cur != -* ]] || return 0
    case "$sub:$sub2" in
        audit:|caps:|stop:|tell:|cost:|pause:|resume:|keep-warm:|runs:|grant:) kind=handler ;;
        budget:set|budget:show|model:set|model:clear|model:show) kind=handler ;;
        memory:search|memory:status|memory:compactions|memory:show|memory:delete|memory:undo) kind=handler ;;
        reopen:|outcome:show) kind=outcome ;;
        run:|logs:|transcript:|token:revoke) kind=agent ;;
        kb:cat|kb:log|kb:audit) kind=file ;;
    esac
    [[ -n $kind ]] || return 0
    local ids
    ids=$(agency "${home[@]}" __complete-ids "$kind" 2>/dev/null) || return 0
    COMPREPLY+=($(compgen -W "$ids" -- "$cur"))
}
complete -F _agency_ids -o bashdefault -o default agency
"#;

/// Fish: the daemon's ids for the same commands' arguments.
const FISH_IDS: &str = r#"
# Ids from the running daemon (`agency __complete-ids KIND`; none without one).
complete -c agency -n "__fish_seen_subcommand_from audit caps stop tell cost pause resume keep-warm runs grant set show clear search status compactions delete undo" -f -a "(agency __complete-ids handler 2>/dev/null)"
complete -c agency -n "__fish_seen_subcommand_from reopen" -f -a "(agency __complete-ids outcome 2>/dev/null)"
complete -c agency -n "__fish_seen_subcommand_from run logs transcript" -f -a "(agency __complete-ids agent 2>/dev/null)"
complete -c agency -n "__fish_seen_subcommand_from cat log audit" -f -a "(agency __complete-ids file 2>/dev/null)"
"#;
