//! A stage's output contract: its JSON Schema (draft 2020-12, formats
//! checked, so a `date-time` that is not one fails), the fields the engine
//! stamps and the checks JSON Schema cannot say. Compiled once per stage.
//!
//! Invariant: [`Artifact`] has no public constructor; the only ways to get
//! one are [`OutputContract::accept`] (stamp, then validate, then check)
//! and [`OutputContract::revalidate`] (a stored artifact read back, checked
//! again). So no unvalidated value is stored or reaches a later stage.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use agency_org::pipeline::{Check, OutcomesSpec, StageModel, StampedField};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Most issues kept for one failure: a re-ask carries them, so they are
/// bounded whatever the answer looks like.
pub const MAX_ISSUES: usize = 20;

/// Most characters of one issue's message (the validator quotes the
/// offending value, which may be the whole answer).
const MAX_MESSAGE_CHARS: usize = 300;

/// One way a value breaks its contract, machine-readable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    /// JSON Pointer into the value (`/scorecard/clarity`; empty: the root).
    pub instance_path: String,
    /// The rule broken: a JSON Schema keyword (`required`, `type`,
    /// `format`, …), `sum` for [`Check::Sum`], `uniqueId`, `dependency`
    /// or `cycle` for a plan's graph ([`agency_org::pipeline::check_plan`]),
    /// `json` for text that is not JSON at all.
    pub keyword: String,
    pub message: String,
}

impl Issue {
    pub fn new(
        instance_path: impl Into<String>,
        keyword: &str,
        message: impl Into<String>,
    ) -> Self {
        let mut message: String = message.into();
        if message.chars().count() > MAX_MESSAGE_CHARS {
            message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
        }
        Issue {
            instance_path: instance_path.into(),
            keyword: keyword.to_owned(),
            message,
        }
    }
}

/// The issues of one failure: the first [`MAX_ISSUES`] and how many more.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issues {
    pub items: Vec<Issue>,
    /// Issues found past the first [`MAX_ISSUES`], not listed.
    #[serde(default)]
    pub omitted: usize,
}

impl Issues {
    /// Keep the first [`MAX_ISSUES`] of `all`, counting the rest.
    pub fn bounded(all: impl IntoIterator<Item = Issue>) -> Self {
        let mut out = Issues::default();
        for issue in all {
            if out.items.len() < MAX_ISSUES {
                out.items.push(issue);
            } else {
                out.omitted += 1;
            }
        }
        out
    }

    pub fn one(issue: Issue) -> Self {
        Issues {
            items: vec![issue],
            omitted: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.omitted == 0
    }
}

/// A value that passed its stage's contract. Serializes as the value;
/// it cannot be deserialized (read one back with
/// [`OutputContract::revalidate`]).
///
/// Neither built directly:
/// ```compile_fail
/// let a = agency_pipeline::Artifact(serde_json::json!({}));
/// ```
/// nor deserialized:
/// ```compile_fail
/// let a: agency_pipeline::Artifact = serde_json::from_str("{}").unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Artifact(Value);

impl Artifact {
    pub fn value(&self) -> &Value {
        &self.0
    }

    pub fn into_value(self) -> Value {
        self.0
    }
}

/// What the engine stamps on an answer: values the answer cannot choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamps {
    /// When the answer arrived ([`StampedField::Timestamp`]).
    pub now: OffsetDateTime,
    /// The run's permission level as the store holds it
    /// ([`StampedField::Level`]).
    pub level: u8,
    /// The ids of the runs in the stage's `history`
    /// ([`StampedField::SimilarRuns`]).
    pub similar_runs: Vec<String>,
    /// What refuses an answer's actions ([`StampedField::BlockedActions`]);
    /// `None`: the plan rules and the workspace alone ([`rules_gate`]).
    pub gate: Option<ActionGate>,
}

/// Whether the permission system refuses an action an answer proposes
/// (`{type, command | path, …}`): `Some(why)` when it does.
#[derive(Clone)]
pub struct ActionGate(pub Arc<GateFn>);

/// The function behind an [`ActionGate`].
pub type GateFn = dyn Fn(&Value) -> Option<String> + Send + Sync;

impl std::fmt::Debug for ActionGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActionGate")
    }
}

impl PartialEq for ActionGate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ActionGate {}

/// What an action acts on: its command, else its path.
pub fn action_target(a: &Value) -> Option<&str> {
    a.get("command")
        .or_else(|| a.get("path"))
        .and_then(Value::as_str)
}

/// The gate without a policy: an action is refused when the plan rules
/// block its command or path (destructive, privileged, out of the
/// workspace), or when its path is absolute or climbs out with `..`.
pub fn rules_gate(a: &Value) -> Option<String> {
    use agency_core::policy::plan::{PlanSeverity, scan_plan_text};
    let target = action_target(a)?;
    if let Some(f) = scan_plan_text(target)
        .into_iter()
        .find(|f| f.severity == PlanSeverity::Block)
    {
        return Some(f.reason.to_string());
    }
    if a.get("command").is_none()
        && (target.starts_with('/')
            || target.starts_with('~')
            || std::path::Path::new(target)
                .components()
                .any(|c| c == std::path::Component::ParentDir))
    {
        return Some(format!("{target} is outside the workspace"));
    }
    None
}

impl Stamps {
    /// The stamps of an answer arriving now to a stage with `context`.
    pub fn new(level: i64, context: &serde_json::Map<String, Value>) -> Stamps {
        let similar_runs = context
            .get(agency_org::pipeline::HISTORY)
            .and_then(|h| h.get("runs"))
            .and_then(Value::as_array)
            .map(|runs| {
                runs.iter()
                    .filter_map(|r| r.get("id").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Stamps {
            now: OffsetDateTime::now_utc(),
            level: u8::try_from(level.clamp(0, 3)).unwrap_or(0),
            similar_runs,
            gate: None,
        }
    }

    /// With `gate` deciding which actions are refused.
    pub fn with_gate(mut self, gate: ActionGate) -> Stamps {
        self.gate = Some(gate);
        self
    }

    /// The lines of `actions` the gate refuses: `TYPE TARGET: why`.
    fn blocked(&self, actions: Option<&Value>) -> Vec<String> {
        let actions = actions
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        actions
            .iter()
            .filter_map(|a| {
                let why = match &self.gate {
                    Some(g) => (g.0)(a),
                    None => rules_gate(a),
                }?;
                let kind = a.get("type").and_then(Value::as_str).unwrap_or("action");
                Some(format!("{kind} {}: {why}", action_target(a).unwrap_or("")))
            })
            .collect()
    }
}

/// Why a stage's contract did not compile.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("failed to compile the output schema of stage {stage}: {message}")]
    Schema { stage: String, message: String },
    #[error(
        "failed to compile stage {stage}: stamped field {field:?} is not a top-level field name"
    )]
    Stamped { stage: String, field: String },
}

/// Most contracts [`OutputContract::cached`] keeps.
pub const CACHED_CONTRACTS: usize = 512;

/// A stage's compiled output contract.
#[derive(Debug)]
pub struct OutputContract {
    stage: String,
    validator: jsonschema::Validator,
    stamped: Vec<StampedField>,
    checks: Vec<Check>,
    outcomes: Option<OutcomesSpec>,
}

impl OutputContract {
    /// Compile `stage.output_schema` as draft 2020-12 with format
    /// assertions on. No remote reference is fetched (the workspace's
    /// jsonschema has no resolver features).
    pub fn compile(stage: &StageModel) -> Result<Self, ContractError> {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&stage.output_schema)
            .map_err(|e| ContractError::Schema {
                stage: stage.name.clone(),
                message: e.to_string(),
            })?;
        for s in &stage.stamped {
            let field = stamped_field(s);
            if field.is_empty() || field.contains(['.', '/']) {
                return Err(ContractError::Stamped {
                    stage: stage.name.clone(),
                    field: field.to_owned(),
                });
            }
        }
        Ok(OutputContract {
            stage: stage.name.clone(),
            validator,
            stamped: stage.stamped.clone(),
            checks: stage.checks.clone(),
            outcomes: stage.outcomes.clone(),
        })
    }

    /// [`OutputContract::compile`], remembered: the runner needs a stage's
    /// contract each time the stage runs and each time a later stage reads
    /// its artifact, and compiling a schema costs far more than checking an
    /// artifact. Keyed by the whole stage's JSON (name, schema, stamps,
    /// checks), so an edited stage is a new contract; emptied whole past
    /// [`CACHED_CONTRACTS`].
    pub fn cached(stage: &StageModel) -> Result<Arc<Self>, ContractError> {
        static CACHE: LazyLock<Mutex<HashMap<String, Arc<OutputContract>>>> =
            LazyLock::new(Mutex::default);
        let key = serde_json::to_string(stage).unwrap_or_default();
        if let Some(c) = CACHE.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(c.clone());
        }
        let c = Arc::new(Self::compile(stage)?);
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHED_CONTRACTS {
            cache.clear();
        }
        cache.insert(key, c.clone());
        Ok(c)
    }

    /// The stage this contract belongs to.
    pub fn stage(&self) -> &str {
        &self.stage
    }

    /// Set the stamped fields on `value` (when it is an object), whatever
    /// it said for them.
    pub fn stamp(&self, value: &mut Value, stamps: &Stamps) {
        let Some(obj) = value.as_object_mut() else {
            return;
        };
        for s in &self.stamped {
            let v = match s {
                StampedField::Const { value, .. } => value.clone(),
                StampedField::Timestamp { .. } => {
                    // RFC 3339 of a UTC time never fails to format.
                    Value::String(
                        stamps
                            .now
                            .to_offset(time::UtcOffset::UTC)
                            .format(&Rfc3339)
                            .unwrap_or_default(),
                    )
                }
                StampedField::Level { .. } => Value::from(stamps.level),
                StampedField::SimilarRuns { .. } => Value::from(stamps.similar_runs.clone()),
                StampedField::BlockedActions { .. } => {
                    Value::from(stamps.blocked(obj.get("actions")))
                }
            };
            obj.insert(stamped_field(s).to_owned(), v);
        }
    }

    /// The schema, then the checks (only on a schema-valid value: a sum
    /// over a missing object says nothing new).
    pub fn validate(&self, value: &Value) -> Result<(), Issues> {
        let issues = Issues::bounded(self.validator.iter_errors(value).map(|e| {
            let keyword = e.kind().keyword().to_owned();
            Issue::new(e.instance_path().as_str(), &keyword, e.to_string())
        }));
        if !issues.is_empty() {
            return Err(issues);
        }
        // A plan (`outcomes:`) must be a DAG of unique ids: the same check
        // the service runs before it stores the artifact.
        let plan = self.outcomes.iter().flat_map(|spec| {
            agency_org::pipeline::check_plan(spec, value)
                .into_iter()
                .map(|i| Issue::new(i.instance_path, i.keyword, i.message))
        });
        let issues = Issues::bounded(
            self.checks
                .iter()
                .filter_map(|c| run_check(c, value))
                .chain(plan),
        );
        if issues.is_empty() {
            Ok(())
        } else {
            Err(issues)
        }
    }

    /// Stamp `value`, validate it and check it: the artifact, or why not.
    pub fn accept(&self, mut value: Value, stamps: &Stamps) -> Result<Artifact, Issues> {
        self.stamp(&mut value, stamps);
        self.validate(&value)?;
        Ok(Artifact(value))
    }

    /// A stored artifact read back (a resumed run): validated again, not
    /// stamped again (its stamps are the ones it was stored with).
    pub fn revalidate(&self, value: Value) -> Result<Artifact, Issues> {
        self.validate(&value)?;
        Ok(Artifact(value))
    }
}

fn stamped_field(s: &StampedField) -> &str {
    match s {
        StampedField::Const { field, .. }
        | StampedField::Timestamp { field }
        | StampedField::Level { field }
        | StampedField::SimilarRuns { field }
        | StampedField::BlockedActions { field } => field,
    }
}

/// `a.b` (or a JSON Pointer `/a/b`) as a JSON Pointer.
fn pointer(path: &str) -> String {
    if path.starts_with('/') || path.is_empty() {
        path.to_owned()
    } else {
        path.split('.')
            .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
            .collect()
    }
}

/// One check: `None` when it holds.
fn run_check(check: &Check, value: &Value) -> Option<Issue> {
    match check {
        Check::Sum { total, of } => {
            let (tp, op) = (pointer(total), pointer(of));
            let Some(t) = value.pointer(&tp).and_then(Value::as_f64) else {
                return Some(Issue::new(tp, "sum", format!("{total} is not a number")));
            };
            let Some(parts) = value.pointer(&op).and_then(Value::as_object) else {
                return Some(Issue::new(op, "sum", format!("{of} is not an object")));
            };
            let mut sum = 0.0;
            for (k, v) in parts {
                let Some(n) = v.as_f64() else {
                    return Some(Issue::new(
                        format!("{op}/{k}"),
                        "sum",
                        format!("{of}.{k} is not a number"),
                    ));
                };
                sum += n;
            }
            ((t - sum).abs() > 1e-9).then(|| {
                Issue::new(
                    tp,
                    "sum",
                    format!("{total} is {t} but the values of {of} sum to {sum}"),
                )
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use agency_org::model::SourceRef;
    use agency_org::pipeline::{RetryPolicy, StageKind};
    use serde_json::json;

    pub(crate) fn stage(
        schema: Value,
        stamped: Vec<StampedField>,
        checks: Vec<Check>,
    ) -> StageModel {
        StageModel {
            name: "Learner".into(),
            description: String::new(),
            kind: StageKind::Llm {
                model: None,
                system: "You are the Learner.".into(),
                prompt: "Reflect on {{input}}".into(),
            },
            reads: vec![],
            output_schema: schema,
            stamped,
            checks,
            retry: RetryPolicy::default(),
            budget: None,
            outcomes: None,
            source: SourceRef {
                file: "agencycore.pipeline".into(),
                line: 1,
            },
        }
    }

    pub(crate) fn learner_schema() -> Value {
        json!({
            "type": "object",
            "required": ["agent", "timestamp", "currentLevel", "reflection"],
            "properties": {
                "agent": {"const": "Learner"},
                "timestamp": {"type": "string", "format": "date-time"},
                "currentLevel": {"type": "integer", "minimum": 0, "maximum": 3},
                "reflection": {"type": "string", "minLength": 1}
            }
        })
    }

    pub(crate) fn stamps() -> Stamps {
        Stamps {
            now: OffsetDateTime::from_unix_timestamp(1_790_000_000).expect("a valid time"),
            level: 0,
            similar_runs: Vec::new(),
            gate: None,
        }
    }

    pub(crate) fn learner_stamped() -> Vec<StampedField> {
        vec![
            StampedField::Const {
                field: "agent".into(),
                value: json!("Learner"),
            },
            StampedField::Timestamp {
                field: "timestamp".into(),
            },
            StampedField::Level {
                field: "currentLevel".into(),
            },
        ]
    }

    #[test]
    fn stamped_fields_override_the_answer() {
        let c = OutputContract::compile(&stage(learner_schema(), learner_stamped(), vec![]))
            .expect("compiles");
        // A prompt-injected answer claiming a higher level and another agent.
        let answer = json!({"agent": "Root", "timestamp": "yesterday", "currentLevel": 3, "reflection": "ok"});
        let a = c.accept(answer, &stamps()).expect("valid once stamped");
        assert_eq!(a.value()["currentLevel"], json!(0));
        assert_eq!(a.value()["agent"], json!("Learner"));
        assert_eq!(a.value()["timestamp"], json!("2026-09-21T14:13:20Z"));
    }

    /// Attack: an answer cannot name runs the store did not find as
    /// similar; the ids are the ones in the stage's `history`.
    #[test]
    fn similar_runs_are_the_historys_never_the_answers() {
        let schema = json!({"type": "object", "required": ["similar"],
            "properties": {"similar": {"type": "array", "items": {"type": "string"}}}});
        let stamped = vec![StampedField::SimilarRuns {
            field: "similar".into(),
        }];
        let c = OutputContract::compile(&stage(schema, stamped, vec![])).expect("compiles");
        let ctx =
            json!({"history": {"runs": [{"id": "run-a"}, {"id": "run-b"}], "improvements": []}});
        let stamps = Stamps::new(7, ctx.as_object().expect("an object"));
        assert_eq!(stamps.level, 3, "a level is clamped to 0-3");
        let a = c
            .accept(json!({"similar": ["invented", "run-z"]}), &stamps)
            .expect("valid once stamped");
        assert_eq!(a.value()["similar"], json!(["run-a", "run-b"]));
        let none = Stamps::new(0, &serde_json::Map::new());
        let a = c.accept(json!({"similar": ["x"]}), &none).expect("valid");
        assert_eq!(a.value()["similar"], json!([]));
    }

    /// Attack: an answer cannot hide a refused action by leaving it out of
    /// its own `blocked` list; the engine gates every proposed action.
    #[test]
    fn blocked_actions_are_the_gates_never_the_answers() {
        let schema = json!({"type": "object", "required": ["actions", "blocked"], "properties": {
            "actions": {"type": "array"},
            "blocked": {"type": "array", "items": {"type": "string"}}}});
        let stamped = vec![StampedField::BlockedActions {
            field: "blocked".into(),
        }];
        let c = OutputContract::compile(&stage(schema, stamped, vec![])).expect("compiles");
        let answer = json!({"blocked": [], "actions": [
            {"type": "runCommand", "command": "rm -rf /"},
            {"type": "createFile", "path": "../outside.rs"},
            {"type": "readFile", "path": "/etc/passwd"},
            {"type": "createFile", "path": "src/main.rs"},
            {"type": "runCommand", "command": "cargo test"},
        ]});
        let a = c
            .accept(answer.clone(), &stamps())
            .expect("valid once stamped");
        let blocked: Vec<&str> = a.value()["blocked"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(blocked.len(), 3, "{blocked:?}");
        assert!(
            blocked[0].starts_with("runCommand rm -rf /: "),
            "{blocked:?}"
        );
        assert!(
            blocked[1].starts_with("createFile ../outside.rs: "),
            "{blocked:?}"
        );
        assert!(
            blocked[2].starts_with("readFile /etc/passwd: "),
            "{blocked:?}"
        );
        // A policy gate decides instead of the rules.
        let gate = ActionGate(Arc::new(|a: &Value| {
            (a["command"] == "cargo test").then(|| "not on this machine".to_owned())
        }));
        let a = c
            .accept(answer, &stamps().with_gate(gate))
            .expect("valid once stamped");
        assert_eq!(
            a.value()["blocked"],
            json!(["runCommand cargo test: not on this machine"])
        );
    }

    #[test]
    fn date_time_format_is_asserted() {
        let c =
            OutputContract::compile(&stage(learner_schema(), vec![], vec![])).expect("compiles");
        let bad = json!({"agent": "Learner", "timestamp": "not a time", "currentLevel": 0, "reflection": "x"});
        let issues = c.validate(&bad).expect_err("format checked");
        assert_eq!(issues.items.len(), 1);
        assert_eq!(issues.items[0].keyword, "format");
        assert_eq!(issues.items[0].instance_path, "/timestamp");
    }

    #[test]
    fn issues_name_path_and_keyword() {
        let c =
            OutputContract::compile(&stage(learner_schema(), vec![], vec![])).expect("compiles");
        let cases = [
            (
                json!({"agent": "Learner", "timestamp": "2026-01-01T00:00:00Z", "currentLevel": 9, "reflection": "x"}),
                "/currentLevel",
                "maximum",
            ),
            (
                json!({"agent": "Learner", "timestamp": "2026-01-01T00:00:00Z", "currentLevel": 0}),
                "",
                "required",
            ),
            (
                json!({"agent": "Other", "timestamp": "2026-01-01T00:00:00Z", "currentLevel": 0, "reflection": "x"}),
                "/agent",
                "const",
            ),
            (json!([1]), "", "type"),
        ];
        for (value, path, keyword) in cases {
            let issues = c.validate(&value).expect_err("invalid");
            assert_eq!(issues.items[0].instance_path, path, "{value}");
            assert_eq!(issues.items[0].keyword, keyword, "{value}");
        }
    }

    #[test]
    fn issues_are_bounded() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        let c = OutputContract::compile(&stage(schema, vec![], vec![])).expect("compiles");
        let issues = c.validate(&json!(vec![1; 50])).expect_err("invalid");
        assert_eq!(issues.items.len(), MAX_ISSUES);
        assert_eq!(issues.omitted, 50 - MAX_ISSUES);
        let long = Issue::new("", "x", "y".repeat(5000));
        assert!(long.message.chars().count() <= MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn sum_check_runs_after_the_schema() {
        let schema = json!({"type": "object", "required": ["totalScore", "scorecard"]});
        let checks = vec![Check::Sum {
            total: "totalScore".into(),
            of: "scorecard".into(),
        }];
        let c = OutputContract::compile(&stage(schema, vec![], checks)).expect("compiles");
        let cases = [
            (
                json!({"totalScore": 7, "scorecard": {"a": 3, "b": 4}}),
                None,
            ),
            (
                json!({"totalScore": 8, "scorecard": {"a": 3, "b": 4}}),
                Some("/totalScore"),
            ),
            (
                json!({"totalScore": 7, "scorecard": {"a": 3, "b": "4"}}),
                Some("/scorecard/b"),
            ),
            (
                json!({"totalScore": "7", "scorecard": {}}),
                Some("/totalScore"),
            ),
            (
                json!({"totalScore": 0, "scorecard": []}),
                Some("/scorecard"),
            ),
        ];
        for (value, path) in cases {
            match (c.validate(&value), path) {
                (Ok(()), None) => {}
                (Err(i), Some(p)) => {
                    assert_eq!(i.items[0].instance_path, p);
                    assert_eq!(i.items[0].keyword, "sum");
                }
                (r, p) => panic!("{value}: {r:?} expected {p:?}"),
            }
        }
    }

    /// A plan that is not a DAG fails the contract with issues the
    /// re-ask carries: a path into the plan, a keyword and a message.
    #[test]
    fn a_plan_stages_contract_checks_its_graph() {
        let schema = json!({"type": "object", "properties": {"tasks": {"type": "array", "items": {
            "type": "object", "required": ["id", "title", "dependencies"],
            "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                "dependencies": {"type": "array", "items": {"type": "string"}}}}}}});
        let mut s = stage(schema, vec![], vec![]);
        s.outcomes = Some(OutcomesSpec {
            items: "tasks".into(),
            id: "id".into(),
            title: "title".into(),
            description: None,
            depends: Some("dependencies".into()),
        });
        let c = OutputContract::compile(&s).expect("compiles");
        let t = |id: &str, deps: &[&str]| json!({"id": id, "title": id, "dependencies": deps});
        let ok = json!({"tasks": [t("a", &[]), t("b", &["a"]), t("c", &["a", "b"])]});
        assert_eq!(c.validate(&ok), Ok(()));
        let cases = [
            (
                json!({"tasks": [t("a", &["b"]), t("b", &["a"])]}),
                "/tasks/1/dependencies/0",
                "cycle",
            ),
            (
                json!({"tasks": [t("a", &[]), t("b", &["a"]), t("c", &["x"])]}),
                "/tasks/2/dependencies/0",
                "dependency",
            ),
            (
                json!({"tasks": [t("a", &[]), t("a", &[])]}),
                "/tasks/1/id",
                "uniqueId",
            ),
            (
                json!({"tasks": [t("a", &["a"])]}),
                "/tasks/0/dependencies/0",
                "cycle",
            ),
        ];
        for (value, path, keyword) in cases {
            let issues = c.validate(&value).expect_err("refused");
            assert_eq!(issues.items[0].instance_path, path, "{value}");
            assert_eq!(issues.items[0].keyword, keyword, "{value}");
        }
        // Without the spec the same cyclic plan is only JSON.
        let plain = OutputContract::compile(&stage(s.output_schema.clone(), vec![], vec![]))
            .expect("compiles");
        assert_eq!(plain.validate(&json!({"tasks": [t("a", &["a"])]})), Ok(()));
    }

    #[test]
    fn bad_contracts_are_refused() {
        let bad = stage(json!({"type": 12}), vec![], vec![]);
        assert!(matches!(
            OutputContract::compile(&bad),
            Err(ContractError::Schema { .. })
        ));
        let bad = stage(
            json!({}),
            vec![StampedField::Timestamp {
                field: "a.b".into(),
            }],
            vec![],
        );
        assert!(matches!(
            OutputContract::compile(&bad),
            Err(ContractError::Stamped { .. })
        ));
    }

    #[test]
    fn revalidate_refuses_a_tampered_artifact() {
        let c =
            OutputContract::compile(&stage(learner_schema(), vec![], vec![])).expect("compiles");
        assert!(c.revalidate(json!({"agent": "Learner"})).is_err());
    }
}
