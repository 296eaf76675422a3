-- BM25's document length is the chunk's number of tokens, as in Lucene and bm25s, not its number
-- of distinct lexemes (length(tsv), which 0009 chose because the tsvector's header gives it for
-- free). A chunk that repeats its words is longer than its distinct count says; with the
-- distinct count, long repetitive chunks were ranked as if short. On CACM's verbose queries
-- exhaustive BM25 over PostgreSQL's own lexemes scores .477 nDCG@10 with distinct lexemes and
-- .489 with tokens, bm25s .494-.499 (docs/decisions.md).
--
-- The count is the lexemes' positions summed (a lexeme without positions counts once), kept in a
-- stored generated column, so every writer of chunks gets it and a search reads an integer
-- from the row it already holds. The collection statistics sum the same count.

CREATE FUNCTION tsvector_tokens(tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT coalesce(sum(greatest(cardinality(positions), 1)), 0)::integer FROM unnest($1) $$;

ALTER TABLE chunks ADD COLUMN tsv_tokens integer GENERATED ALWAYS AS (tsvector_tokens(tsv)) STORED;

ALTER TABLE text_rank_versions RENAME COLUMN lexemes TO tokens;

UPDATE text_rank_versions v
SET tokens = s.tokens
FROM (
    SELECT source_id, index_version, sum(tsv_tokens) AS tokens FROM chunks GROUP BY 1, 2
) AS s
WHERE v.source_id = s.source_id AND v.index_version = s.index_version;

CREATE OR REPLACE FUNCTION text_rank_track() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    delta text := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT source_id, index_version, tsv, 1 AS sign FROM new_rows'
        WHEN 'DELETE' THEN 'SELECT source_id, index_version, tsv, -1 AS sign FROM old_rows'
        ELSE 'SELECT n.source_id, n.index_version, n.tsv, 1 AS sign
              FROM new_rows n JOIN old_rows o USING (id)
              WHERE (n.source_id, n.index_version, n.tsv)
                    IS DISTINCT FROM (o.source_id, o.index_version, o.tsv)
              UNION ALL
              SELECT o.source_id, o.index_version, o.tsv, -1 AS sign
              FROM old_rows o JOIN new_rows n USING (id)
              WHERE (n.source_id, n.index_version, n.tsv)
                    IS DISTINCT FROM (o.source_id, o.index_version, o.tsv)'
    END;
BEGIN
    -- One row per (version, lexeme) with the change in its chunk count, and one per version
    -- (lexeme NULL) with the change in its chunks and in their summed lengths (tokens).
    EXECUTE format($sql$
        CREATE TEMP TABLE text_rank_delta ON COMMIT DROP AS
        SELECT d.source_id, d.index_version, l.lexeme, sum(d.sign) AS chunks, 0 AS tokens
        FROM (%s) AS d, unnest(tsvector_to_array(d.tsv)) AS l(lexeme)
        GROUP BY 1, 2, 3
        UNION ALL
        SELECT d.source_id, d.index_version, NULL, sum(d.sign), sum(d.sign * tsvector_tokens(d.tsv))
        FROM (%s) AS d
        GROUP BY 1, 2
    $sql$, delta, delta);

    INSERT INTO text_rank_versions AS v (source_id, index_version, chunks, tokens)
    SELECT source_id, index_version, chunks, tokens
    FROM text_rank_delta
    WHERE lexeme IS NULL AND chunks > 0
    ORDER BY 1, 2
    ON CONFLICT (source_id, index_version) DO UPDATE
        SET chunks = v.chunks + excluded.chunks, tokens = v.tokens + excluded.tokens;

    UPDATE text_rank_versions v
    SET chunks = v.chunks + d.chunks, tokens = v.tokens + d.tokens
    FROM text_rank_delta d
    WHERE d.lexeme IS NULL AND d.chunks <= 0
      AND v.source_id = d.source_id AND v.index_version = d.index_version;

    -- A version left without chunks (a superseded build dropped) loses its lexemes by cascade.
    DELETE FROM text_rank_versions v
    USING text_rank_delta d
    WHERE d.lexeme IS NULL AND d.chunks < 0 AND v.chunks <= 0
      AND v.source_id = d.source_id AND v.index_version = d.index_version;

    INSERT INTO text_rank_lexemes AS t (source_id, index_version, lexeme, chunks)
    SELECT source_id, index_version, lexeme, chunks
    FROM text_rank_delta
    WHERE lexeme IS NOT NULL AND chunks > 0
    ORDER BY 1, 2, 3
    ON CONFLICT (source_id, index_version, lexeme) DO UPDATE SET chunks = t.chunks + excluded.chunks;

    UPDATE text_rank_lexemes t
    SET chunks = t.chunks + d.chunks
    FROM text_rank_delta d
    WHERE d.lexeme IS NOT NULL AND d.chunks < 0
      AND t.source_id = d.source_id AND t.index_version = d.index_version AND t.lexeme = d.lexeme;

    DELETE FROM text_rank_lexemes t
    USING text_rank_delta d
    WHERE d.lexeme IS NOT NULL AND d.chunks < 0 AND t.chunks <= 0
      AND t.source_id = d.source_id AND t.index_version = d.index_version AND t.lexeme = d.lexeme;

    DROP TABLE text_rank_delta;
    RETURN NULL;
END
$$;
