-- Each chunk carries the level of its source's space, so the pgvector backend can keep one HNSW
-- index per level (search/vectors.py) and a chain's per-level searches each walk their own graph.
--
-- With one index per dimension, a level's filter applied after the scan: to find 100 chunks of a
-- project holding a tenth of the table the iterative scan walked about 1,000, and a chain's three
-- scans cost 8.6x one (docs/decisions.md, "Vector indexes per level"). A space's level and a
-- source's space never change once created, so the copy cannot go stale; the trigger sets it on
-- every insert from the source's space, whatever the writer (indexer, memory store, tests).
--
-- The per-dimension indexes are dropped first, so the backfill does not rewrite them; the first
-- search of a dimension builds the per-level ones (ensure_vector_index), as after 0011.
DO $$
DECLARE
    old_index record;
BEGIN
    FOR old_index IN
        SELECT indexname FROM pg_indexes
        WHERE schemaname = current_schema() AND tablename = 'chunks'
          AND indexname ~ '^chunks_embedding_hnsw_half_[0-9]+$'
    LOOP
        EXECUTE format('DROP INDEX %I', old_index.indexname);
    END LOOP;
END
$$;

ALTER TABLE chunks ADD COLUMN space_level text;

UPDATE chunks c SET space_level = sp.level
FROM sources s JOIN spaces sp ON sp.id = s.space_id
WHERE s.id = c.source_id;

ALTER TABLE chunks ALTER COLUMN space_level SET NOT NULL;

CREATE FUNCTION chunks_set_space_level() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.space_level := (
        SELECT sp.level FROM sources s JOIN spaces sp ON sp.id = s.space_id
        WHERE s.id = NEW.source_id
    );
    RETURN NEW;
END
$$;

CREATE TRIGGER chunks_space_level BEFORE INSERT OR UPDATE OF source_id ON chunks
    FOR EACH ROW EXECUTE FUNCTION chunks_set_space_level();
