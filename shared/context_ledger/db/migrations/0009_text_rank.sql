-- BM25 statistics for the full-text rank (search/fulltext.py).
--
-- BM25 needs, for the chunks a search sees, how many there are, their mean length and, for each
-- query lexeme, how many chunks hold it. Searches see the current index version of a set of
-- sources, so the statistics are kept per (source, index version) and summed over the searched
-- versions at query time: a handful of primary-key lookups instead of counting matches.
--
-- The length of a chunk is length(tsv), its number of distinct lexemes: read from the
-- tsvector's header, free at query time.
--
-- Triggers on chunks keep both tables exact for every writer (index builds, the memory API, bulk
-- loads, deletes of superseded versions), so no code path has to remember to call anything.
-- They are statement-level with transition tables: one aggregate per statement, not one upsert
-- per row. Positive counts are upserted in key order (concurrent writers of one version queue on
-- the same rows in the same order, so they cannot deadlock); negative ones only update existing
-- rows, because a source's deletion cascades to its statistics before the chunk trigger runs.

CREATE TABLE text_rank_versions (
    source_id     uuid NOT NULL,
    index_version integer NOT NULL,
    chunks        bigint NOT NULL,
    lexemes       bigint NOT NULL, -- sum of length(tsv) over the chunks
    PRIMARY KEY (source_id, index_version),
    FOREIGN KEY (source_id, index_version) REFERENCES index_versions (source_id, version)
        ON DELETE CASCADE
);

CREATE TABLE text_rank_lexemes (
    source_id     uuid NOT NULL,
    index_version integer NOT NULL,
    lexeme        text NOT NULL,
    chunks        integer NOT NULL, -- chunks of the version whose tsv holds the lexeme
    PRIMARY KEY (source_id, index_version, lexeme),
    FOREIGN KEY (source_id, index_version) REFERENCES text_rank_versions (source_id, index_version)
        ON DELETE CASCADE
);

-- The change a statement made, as signed rows: +1 for a chunk (its text) added, -1 for one
-- removed. An UPDATE counts only rows whose text or version changed (storing an embedding does
-- not touch the statistics).
CREATE FUNCTION text_rank_track() RETURNS trigger
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
    -- (lexeme NULL) with the change in its chunks and in their summed lengths.
    EXECUTE format($sql$
        CREATE TEMP TABLE text_rank_delta ON COMMIT DROP AS
        SELECT d.source_id, d.index_version, l.lexeme, sum(d.sign) AS chunks, 0 AS lexemes
        FROM (%s) AS d, unnest(tsvector_to_array(d.tsv)) AS l(lexeme)
        GROUP BY 1, 2, 3
        UNION ALL
        SELECT d.source_id, d.index_version, NULL, sum(d.sign), sum(d.sign * length(d.tsv))
        FROM (%s) AS d
        GROUP BY 1, 2
    $sql$, delta, delta);

    INSERT INTO text_rank_versions AS v (source_id, index_version, chunks, lexemes)
    SELECT source_id, index_version, chunks, lexemes
    FROM text_rank_delta
    WHERE lexeme IS NULL AND chunks > 0
    ORDER BY 1, 2
    ON CONFLICT (source_id, index_version) DO UPDATE
        SET chunks = v.chunks + excluded.chunks, lexemes = v.lexemes + excluded.lexemes;

    UPDATE text_rank_versions v
    SET chunks = v.chunks + d.chunks, lexemes = v.lexemes + d.lexemes
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

CREATE TRIGGER chunks_text_rank_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_rank_track();
CREATE TRIGGER chunks_text_rank_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_rank_track();
CREATE TRIGGER chunks_text_rank_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_rank_track();

-- The statistics of the chunks already stored.
INSERT INTO text_rank_versions (source_id, index_version, chunks, lexemes)
SELECT source_id, index_version, count(*), sum(length(tsv))
FROM chunks
GROUP BY 1, 2;

INSERT INTO text_rank_lexemes (source_id, index_version, lexeme, chunks)
SELECT c.source_id, c.index_version, l.lexeme, count(*)
FROM chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
GROUP BY 1, 2, 3;
