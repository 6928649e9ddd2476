-- Migration 21: how a model call's charge was found (issue 27 item 3).
-- `unpriced`: the price table had no price for its model (its cost is 0
-- and `agency cost` says so; a cost budget refuses such calls). `estimated`:
-- the answer's final usage was never read (a stream cut, the agent gone,
-- an answer that could not be read), so the call was charged at its
-- reservation, the most the provider could have billed, not at what was
-- seen.
ALTER TABLE model_calls ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE model_calls ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
