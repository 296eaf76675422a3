-- Re-embedding (memory/reembed.py): after the embeddings model or dimension changes, the served
-- entries whose vector is not of the configured provider ("<model>/<dimensions>", or none at all)
-- are embedded again. This index finds them by project, and counts them for /relevant's warning
-- and the job's progress, without reading the entries whose vector is current: the provider
-- ranges on either side of the configured one (and NULL) are index range scans.
CREATE INDEX memory_entries_provider ON memory_entries (space_id, embedding_provider)
    WHERE deleted_at IS NULL AND accepted_revision IS NOT NULL;
