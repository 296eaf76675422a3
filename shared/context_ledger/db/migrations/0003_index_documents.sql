-- Documents of an index build whose language has a code graph (Go, Python): publishing needs
-- every file of the snapshot at once to resolve calls across files and packages. Rows live only
-- while the build is open; publishing removes them.
CREATE TABLE index_documents (
    source_id      uuid NOT NULL,
    index_version  integer NOT NULL,
    path           text NOT NULL,
    language       text NOT NULL,
    content        text NOT NULL,
    PRIMARY KEY (source_id, index_version, path),
    FOREIGN KEY (source_id, index_version) REFERENCES index_versions (source_id, version)
        ON DELETE CASCADE
);

-- Counters of a build, shown when it is published.
ALTER TABLE index_versions
    ADD COLUMN token_count integer NOT NULL DEFAULT 0,
    ADD COLUMN edge_count integer NOT NULL DEFAULT 0,
    ADD COLUMN embedded_count integer NOT NULL DEFAULT 0;

CREATE INDEX chunks_source_path ON chunks (source_id, index_version, path);
