-- Memory API (spec: memory-relevant-api). A project key is a project-level space of its
-- organisation (spaces.key); its memories are entries with revisions (0001), and each entry's
-- accepted revision is also one chunk of the project's memory source, so the context API's
-- retrieval serves team memory like any other source.

-- One memory source per project space, created with the project on its first write.
CREATE TABLE memory_projects (
    space_id         uuid PRIMARY KEY,
    org_id           uuid NOT NULL,
    source_id        uuid NOT NULL UNIQUE,
    -- new revisions wait, pending, until an admin of the project accepts them
    review_required  boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (org_id, space_id) REFERENCES spaces (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, source_id) REFERENCES sources (org_id, id) ON DELETE CASCADE
);

-- Deleting a memory keeps its entry and revisions (attribution records name them); the
-- tombstone says who deleted it.
ALTER TABLE memory_entries ADD COLUMN deleted_by text;

-- What /relevant scores, for the accepted revision, on the entry itself: candidates are then one
-- index range scan of memory_entries, without a join to the revisions of every project. Written
-- in the same statement that moves accepted_revision (memory/store.py), so they never disagree.
-- The vector is the unit vector as little-endian float32 bytes: /relevant scores up to 10,000
-- candidates in one numpy product, and decoding 10,000 real[] arrays row by row would cost more
-- than the whole request may take. Revisions keep their fields, not their (derived) vectors.
ALTER TABLE memory_entries
    ADD COLUMN importance double precision NOT NULL DEFAULT 0 CHECK (importance BETWEEN 0 AND 1),
    ADD COLUMN token_count integer NOT NULL DEFAULT 0 CHECK (token_count >= 0),
    ADD COLUMN embedding_f32 bytea CHECK (length(embedding_f32) % 4 = 0),
    ADD COLUMN embedding_provider text;
ALTER TABLE memory_revisions DROP COLUMN embedding, DROP COLUMN embedding_provider;

-- /relevant's candidates and the list endpoint: the served entries of one project, newest first.
CREATE INDEX memory_entries_served ON memory_entries (space_id, created_at DESC, id DESC)
    WHERE deleted_at IS NULL AND accepted_revision IS NOT NULL;
DROP INDEX memory_entries_space;

-- The memory API's rate limit: requests per API key (or per user and client for tokens) in a
-- 60-second window that starts at the first request after the previous window ended
-- (memory/ratelimit.py).
CREATE TABLE memory_rate_windows (
    key_sha256    bytea PRIMARY KEY CHECK (length(key_sha256) = 32),
    window_start  timestamptz NOT NULL,
    requests      integer NOT NULL
);

-- The spec echoes confidence and importance as sent (0.9, not real's 0.8999999761581421).
ALTER TABLE memory_revisions
    ALTER COLUMN confidence TYPE double precision,
    ALTER COLUMN importance TYPE double precision;
