-- An aborted build: an ingest that failed after opening it gives it up (POST .../abort), so no
-- build is left open for ever. Its rows are deleted; the version row stays, so numbers are never
-- reused and the history shows what happened.
ALTER TABLE index_versions DROP CONSTRAINT index_versions_state_check;
ALTER TABLE index_versions ADD CONSTRAINT index_versions_state_check
    CHECK (state IN ('building', 'published', 'superseded', 'aborted'));
