-- Wake-ups between daemons: every statement that appends to the event
-- log notifies channel `agency_events` with the highest number it added
-- (an id only; listeners read the log). Delivered at commit, so a listener
-- never hears of an event it cannot read yet.
CREATE FUNCTION agency_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agency_events', (SELECT max(seq) FROM added)::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION agency_events_notify();
