-- Vector storage for both search backends.
--
-- exact (default): chunks.embedding real[] and cosine_similarity() below; no extension needed.
-- pgvector: chunks.embedding_vector, generated from chunks.embedding so every writer of real[]
-- fills it without knowing about it. Its HNSW indexes are partial, one per dimension, and are
-- created at run time (search/vectors.py: ensure_vector_index) because the dimension comes from
-- configuration, not from the schema.

-- Both columns are generated: they can never disagree with chunks.embedding.
ALTER TABLE chunks
    ADD COLUMN embedding_dims integer GENERATED ALWAYS AS (cardinality(embedding)) STORED,
    -- What pgvector accepts, so both backends accept the same rows: one dimension, 1 to 16000
    -- values, no NaN or infinity.
    ADD CONSTRAINT chunks_embedding_shape CHECK (
        embedding IS NULL OR (
            array_ndims(embedding) = 1
            AND cardinality(embedding) BETWEEN 1 AND 16000
            AND NOT ('NaN' = ANY (embedding) OR 'Infinity' = ANY (embedding)
                     OR '-Infinity' = ANY (embedding))
        )
    );

-- Cosine similarity of two vectors in plain SQL: NULL when the lengths differ or a vector is
-- zero. Sums run in double precision. COST tells the planner a call is expensive (hundreds of
-- additions), which lets it scan in parallel.
CREATE FUNCTION cosine_similarity(a real[], b real[]) RETURNS double precision
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 5000
RETURN (
    SELECT CASE WHEN cardinality(a) = cardinality(b) THEN
        sum(x::float8 * y) / nullif(sqrt(sum(x::float8 * x)) * sqrt(sum(y::float8 * y)), 0)
    END
    FROM unnest(a, b) AS t(x, y)
);

-- pgvector, when the server has it and we may create it. The spec wants the extension created by
-- a superuser; a migration run by a role without that right carries on without the column, and
-- the pgvector backend then fails closed (503). A superuser who creates the extension first
-- (CREATE EXTENSION vector) gets the column when this migration runs.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RAISE NOTICE 'pgvector is not installed on this server: exact search only';
        RETURN;
    END IF;
    BEGIN
        CREATE EXTENSION IF NOT EXISTS vector;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'pgvector needs a superuser to create it: exact search only';
        RETURN;
    END;
    ALTER TABLE chunks
        ADD COLUMN embedding_vector vector GENERATED ALWAYS AS (embedding::vector) STORED;
END
$$;
