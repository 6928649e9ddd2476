-- Migration 4 (secrets): the process group of each spawned agent, so that a
-- daemon restarted after a crash can stop what its predecessor left
-- running. `started` is the group leader's start time (clock ticks since
-- boot, /proc/PID/stat field 22): with the pgid it tells a surviving agent
-- from an unrelated process that reused the number.
CREATE TABLE agent_processes (
    agent   TEXT PRIMARY KEY NOT NULL REFERENCES agents (id) DEFERRABLE INITIALLY DEFERRED,
    pgid    INTEGER NOT NULL,
    started INTEGER NOT NULL
);
