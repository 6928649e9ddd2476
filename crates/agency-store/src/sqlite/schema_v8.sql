-- Migration 8 (reach): what a run record says besides usage — the prompt's
-- version, and how the run ended when that was not normal (the next agent
-- of the handler is told, even after a daemon restart) — and the index
-- that lists a handler's runs newest first.
ALTER TABLE agent_runs ADD COLUMN prompt_version INTEGER;
-- NULL: ended normally, still running, or recorded before this column.
ALTER TABLE agent_runs ADD COLUMN ended_how TEXT;

CREATE INDEX agents_by_handler_start ON agents (handler, started_at);
