-- Deduplication on write (memory API, "dedupe": true): a live memory whose normalised content and
-- type equal the new one's is answered instead of storing a second copy.
--
-- The normalisation is defined once, here, and every key is computed by it: the entry's key when a
-- revision is accepted (memory/store.py) and the new memory's key when a write looks for a match.
-- Content is folded the way the issue asks: runs of Unicode White_Space (the characters Python's
-- str.isspace() takes, listed rather than `\s`, whose meaning beyond ASCII depends on the locale)
-- become one space, the ends are trimmed, and case is folded by lower() in the database's
-- collation (Unicode-aware in a UTF-8 locale; ASCII only under the C locale). The type is part of
-- the key: a decision and a fact with the same words are two memories.
CREATE FUNCTION memory_dedupe_key(memory_type text, content text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN sha256(convert_to(
    memory_type || E'\n' || lower(btrim(regexp_replace(
        content,
        '[\t\n\v\f\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+',
        ' ',
        'g'
    ))),
    'UTF8'
));

-- The key of the entry's accepted revision (NULL while none is accepted), beside the other
-- scoring inputs the entry keeps for it.
ALTER TABLE memory_entries ADD COLUMN dedupe_key bytea;

UPDATE memory_entries e
SET dedupe_key = memory_dedupe_key(r.type, r.content)
FROM memory_revisions r
WHERE r.entry_id = e.id AND r.revision = e.accepted_revision;

-- A write's lookup: the live entries of one project with one key.
CREATE INDEX memory_entries_dedupe ON memory_entries (space_id, dedupe_key)
    WHERE deleted_at IS NULL AND accepted_revision IS NOT NULL;
