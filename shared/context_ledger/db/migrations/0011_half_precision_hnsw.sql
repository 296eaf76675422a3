-- The pgvector backend's HNSW indexes move to half-precision vectors (search/vectors.py).
--
-- The indexes are created at run time, one per dimension in use, by the first search of that
-- dimension (ensure_vector_index). Dropping the full-precision ones here makes that first search
-- build the half-precision index in their place; until then nothing else reads them. Where
-- pgvector is absent there is nothing to drop.
DO $$
DECLARE
    old_index record;
BEGIN
    FOR old_index IN
        SELECT indexname FROM pg_indexes
        WHERE schemaname = current_schema() AND tablename = 'chunks'
          AND indexname ~ '^chunks_embedding_hnsw_[0-9]+$'
    LOOP
        EXECUTE format('DROP INDEX %I', old_index.indexname);
    END LOOP;
END
$$;
