-- Migration 5 (logging): each agent run's captured stdout/stderr (bounded
-- by the daemon: head and tail, the middle cut and marked) as a blob.
ALTER TABLE agent_runs ADD COLUMN log TEXT;

-- gc asks whether any run points at a blob before removing it.
CREATE INDEX agent_runs_by_transcript ON agent_runs (transcript) WHERE transcript IS NOT NULL;
CREATE INDEX agent_runs_by_log ON agent_runs (log) WHERE log IS NOT NULL;
