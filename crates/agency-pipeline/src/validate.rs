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
    /// `format`, …), `sum` for [`Check::Sum`], `facts` for [`Check::Facts`],
    /// `uniqueId`, `dependency`
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
    /// The run's facts as the stage read them ([`StampedField::Facts`]).
    pub facts: Option<Value>,
    /// The model that answered, `UPSTREAM/MODEL` ([`StampedField::Grader`]);
    /// set by the ladder for each answer.
    pub grader: Option<String>,
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
            facts: context.get(agency_org::pipeline::FACTS).cloned(),
            grader: None,
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
    /// The stage's rubric ([`agency_org::pipeline::rubric_of`]), stamped
    /// by [`StampedField::Rubric`].
    rubric: String,
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
            rubric: agency_org::pipeline::rubric_of(stage),
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
                // No facts read: the empty facts, which cap nothing.
                StampedField::Facts { .. } => stamps
                    .facts
                    .clone()
                    .unwrap_or_else(agency_org::pipeline::empty_facts),
                StampedField::Rubric { .. } => Value::String(self.rubric.clone()),
                StampedField::Grader { .. } => Value::String(
                    stamps
                        .grader
                        .clone()
                        .unwrap_or_else(|| "unknown".to_owned()),
                ),
            };
            obj.insert(stamped_field(s).to_owned(), v);
        }
        // What a `facts` check capped is the engine's to write (after the
        // schema held); an answer's own list is dropped here.
        for c in &self.checks {
            if let Check::Facts {
                capped: Some(field),
                ..
            } = c
            {
                obj.insert(field.clone(), Value::Array(Vec::new()));
            }
        }
    }

    /// The schema, then the checks (only on a schema-valid value: a sum
    /// over a missing object says nothing new).
    pub fn validate(&self, value: &Value) -> Result<(), Issues> {
        self.schema_holds(value)?;
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

    fn schema_holds(&self, value: &Value) -> Result<(), Issues> {
        let issues = Issues::bounded(self.validator.iter_errors(value).map(|e| {
            let keyword = e.kind().keyword().to_owned();
            Issue::new(e.instance_path().as_str(), &keyword, e.to_string())
        }));
        if issues.is_empty() {
            Ok(())
        } else {
            Err(issues)
        }
    }

    /// Stamp `value`, validate it, cap it by its facts (a `facts` check,
    /// on a value whose schema holds) and check it: the artifact, or why
    /// not.
    pub fn accept(&self, mut value: Value, stamps: &Stamps) -> Result<Artifact, Issues> {
        self.stamp(&mut value, stamps);
        self.schema_holds(&value)?;
        for c in &self.checks {
            agency_org::pipeline::caps::apply(c, &mut value);
        }
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
        | StampedField::BlockedActions { field }
        | StampedField::Facts { field }
        | StampedField::Rubric { field }
        | StampedField::Grader { field } => field,
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
        Check::Facts { .. } => agency_org::pipeline::caps::verify(check, value)
            .map(|(at, why)| Issue::new(at, "facts", why)),
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
pub(crate) mod tests;
