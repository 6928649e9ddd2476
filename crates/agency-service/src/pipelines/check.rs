//! The checks the service makes itself, whoever handed it a pipeline or an
//! artifact: a Pipeline Model received over the API is re-checked (the
//! compiler's checks on a source are `agency-org`'s), and an artifact is
//! validated against its stage's output schema every time it is stored
//! and every time it is read back, so no unvalidated artifact is ever
//! stored or reaches a later stage.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use agency_org::pipeline::{
    Check, MAX_REPAIR_ATTEMPTS, PIPELINE_VERSION, PipelineModel, StageModel,
};
use serde_json::Value;

use crate::Result;
use crate::error::ServiceError;

/// Most stages a pipeline may have.
pub const MAX_STAGES: usize = 64;

/// Most bytes of one artifact (its JSON).
pub const MAX_ARTIFACT_BYTES: usize = 1024 * 1024;

/// Compiled output schemas by the BLAKE3 of their JSON: a run's stages
/// are validated at every store and every read, and compiling a schema
/// costs far more than checking an artifact against it. Emptied whole
/// when it holds [`CACHED_SCHEMAS`] (pipelines have a few dozen schemas).
static COMPILED: LazyLock<Mutex<HashMap<[u8; 32], Arc<jsonschema::Validator>>>> =
    LazyLock::new(Mutex::default);

/// Most compiled schemas kept.
const CACHED_SCHEMAS: usize = 512;

/// Compile a stage's output schema: draft 2020-12, formats (`date-time`)
/// checked, no remote reference fetched.
pub(crate) fn validator(stage: &StageModel) -> Result<Arc<jsonschema::Validator>> {
    let key = *blake3::hash(stage.output_schema.to_string().as_bytes()).as_bytes();
    if let Some(v) = COMPILED.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(v.clone());
    }
    let v = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&stage.output_schema)
        .map_err(|e| {
            ServiceError::invalid(format!(
                "failed to compile the output schema of stage {:?}: {e}",
                stage.name
            ))
        })?;
    let v = Arc::new(v);
    let mut cache = COMPILED.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() >= CACHED_SCHEMAS {
        cache.clear();
    }
    cache.insert(key, v.clone());
    Ok(v)
}

/// Whether `artifact` may stand as `stage`'s output: its schema and its
/// checks hold. The error names the first few places it breaks.
pub(crate) fn validate_artifact(stage: &StageModel, artifact: &Value) -> Result<()> {
    let size = serde_json::to_vec(artifact)
        .map(|b| b.len())
        .unwrap_or(usize::MAX);
    if size > MAX_ARTIFACT_BYTES {
        return Err(ServiceError::invalid(format!(
            "failed to accept the artifact of stage {:?}: {size} bytes, more than {MAX_ARTIFACT_BYTES}",
            stage.name
        )));
    }
    let v = validator(stage)?;
    let errors: Vec<String> = v
        .iter_errors(artifact)
        .take(3)
        .map(|e| {
            let path = e.instance_path().to_string();
            format!("at {}: {e}", if path.is_empty() { "/" } else { &path })
        })
        .collect();
    if !errors.is_empty() {
        return Err(ServiceError::invalid(format!(
            "failed to accept the artifact of stage {:?}: it does not match the stage's output schema ({})",
            stage.name,
            errors.join("; ")
        )));
    }
    for c in &stage.checks {
        match c {
            Check::Sum { total, of } => {
                let total_v = pointer(artifact, total).and_then(Value::as_f64);
                let parts = pointer(artifact, of).and_then(Value::as_object);
                let sum: Option<f64> = parts.map(|m| m.values().filter_map(Value::as_f64).sum());
                match (total_v, sum) {
                    (Some(t), Some(s)) if (t - s).abs() < 1e-9 => {}
                    _ => {
                        return Err(ServiceError::invalid(format!(
                            "failed to accept the artifact of stage {:?}: {total} must be the sum of the numbers in {of}",
                            stage.name
                        )));
                    }
                }
            }
            Check::Facts { .. } => {
                if let Some((at, why)) = agency_org::pipeline::caps::verify(c, artifact) {
                    return Err(ServiceError::invalid(format!(
                        "failed to accept the artifact of stage {:?}: its scorecard does not obey its facts (at {at}: {why})",
                        stage.name
                    )));
                }
            }
        }
    }
    // The same graph check as the engine's output contract.
    if let Some(spec) = &stage.outcomes
        && let Some(i) = agency_org::pipeline::check_plan(spec, artifact).first()
    {
        return Err(ServiceError::invalid(format!(
            "failed to accept the artifact of stage {:?}: its plan is not a graph of unique ids without cycles (at {}: {}: {})",
            stage.name, i.instance_path, i.keyword, i.message
        )));
    }
    Ok(())
}

/// A dotted path (`scorecard.safety`) into a JSON value.
fn pointer<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(v, |v, k| v.get(k))
}

/// Re-check a Pipeline Model handed to the service (the REST API takes the
/// compiled JSON): the structural rules the engine relies on. Its input
/// schema is compiled by [`check_input`], which always follows.
pub(crate) fn check_model(m: &PipelineModel) -> Result<()> {
    let bad = |why: String| {
        Err(ServiceError::invalid(format!(
            "failed to start pipeline {:?}: {why}",
            m.name
        )))
    };
    if m.version != PIPELINE_VERSION {
        return bad(format!(
            "its model is {:?}, this daemon runs {PIPELINE_VERSION:?}; compile it again",
            m.version
        ));
    }
    if m.name.trim().is_empty() || m.name.len() > 128 {
        return bad("its name must be 1 to 128 characters".to_owned());
    }
    if m.stages.is_empty() || m.stages.len() > MAX_STAGES {
        return bad(format!("it must have 1 to {MAX_STAGES} stages"));
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for s in &m.stages {
        if s.name.is_empty()
            || s.name == "input"
            || s.name == agency_org::pipeline::HISTORY
            || s.name == agency_org::pipeline::FACTS
            || s.name.len() > 128
        {
            return bad(format!("stage name {:?} is not allowed", s.name));
        }
        for r in &s.reads {
            if r.stage != "input"
                && r.stage != agency_org::pipeline::HISTORY
                && r.stage != agency_org::pipeline::FACTS
                && !seen.contains(r.stage.as_str())
            {
                return bad(format!(
                    "stage {:?} reads {:?}, which no earlier stage produces",
                    s.name, r.stage
                ));
            }
        }
        if !seen.insert(&s.name) {
            return bad(format!("stage {:?} is declared twice", s.name));
        }
        if s.retry.repair_attempts > MAX_REPAIR_ATTEMPTS {
            return bad(format!(
                "stage {:?} asks for {} repair attempts, at most {MAX_REPAIR_ATTEMPTS}",
                s.name, s.retry.repair_attempts
            ));
        }
        if s.output_schema.get("type").and_then(Value::as_str) != Some("object") {
            return bad(format!(
                "the output schema of stage {:?} must describe an object",
                s.name
            ));
        }
        validator(s)?;
    }
    Ok(())
}

/// The pipeline's input schema, compiled.
fn input_validator(m: &PipelineModel) -> Result<jsonschema::Validator> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&m.input_schema)
        .map_err(|e| {
            ServiceError::invalid(format!(
                "failed to compile the input schema of pipeline {:?}: {e}",
                m.name
            ))
        })
}

/// Check a run's input against the pipeline's input schema.
pub(crate) fn check_input(m: &PipelineModel, input: &Value) -> Result<()> {
    let v = input_validator(m)?;
    if let Some(e) = v.iter_errors(input).next() {
        return Err(ServiceError::invalid(format!(
            "failed to start pipeline {:?}: its input does not match the pipeline's input schema ({e})",
            m.name
        )));
    }
    Ok(())
}
