-- pgvector's copy of a chunk's embedding stays in the row: STORAGE MAIN instead of EXTERNAL.
--
-- The default (exact) search backend computes the cosine of every searched chunk's
-- embedding_vector; with EXTERNAL storage each one was read from the TOAST table (an index lookup
-- and a page per chunk). Kept in the row, the statement takes a third less at 100k chunks
-- (407 -> 276 ms p50, docs/decisions.md); the real[] embedding, which only a database without
-- pgvector searches, and the content leave the row instead. A vector too large to fit a page
-- beside the rest of the row still moves out.
--
-- Without pgvector there is no such column (migration 0002) and nothing to do. Existing rows keep
-- their layout until rewritten, as for migration 0012 (docs/deploy.md).
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_attribute
        WHERE attrelid = 'chunks'::regclass AND attname = 'embedding_vector' AND NOT attisdropped
    ) THEN
        ALTER TABLE chunks ALTER COLUMN embedding_vector SET STORAGE MAIN;
    END IF;
END
$$;
