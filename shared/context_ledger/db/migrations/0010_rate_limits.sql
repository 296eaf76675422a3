-- Rate limits (ratelimit/store.py): one GCRA bucket per counted key, shared by every function
-- instance. A key is the SHA-256 of what is counted (an organisation, an API key, the memory
-- API's credential), never the credential itself. ``tat`` is the bucket's theoretical arrival
-- time: a request is admitted while admitting it keeps ``tat`` within the burst of now.
--
-- Every request updates one or two rows and no index column: a low fill factor leaves room on
-- each page for HOT updates, so the hot rows do not bloat the primary key index.
CREATE TABLE rate_buckets (
    key_sha256  bytea PRIMARY KEY CHECK (length(key_sha256) = 32),
    tat         timestamptz NOT NULL
) WITH (fillfactor = 50);

-- The memory API's fixed 60-second windows (0006) are counted in rate_buckets now.
DROP TABLE memory_rate_windows;
