-- Migration 26: what a run was told. The system prompt and the first
-- message an agent received, as blobs of its run record (`agency run
-- AGENT --prompt`); kept from garbage collection like its transcript.
ALTER TABLE agent_runs ADD COLUMN prompt TEXT;
ALTER TABLE agent_runs ADD COLUMN first_message TEXT;
CREATE INDEX agent_runs_prompt ON agent_runs (prompt) WHERE prompt IS NOT NULL;
CREATE INDEX agent_runs_first_message ON agent_runs (first_message)
    WHERE first_message IS NOT NULL;
