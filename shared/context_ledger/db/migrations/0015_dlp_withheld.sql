-- Classifications an organisation withholds from every caller (README, "DLP"): by default
-- none, and every classification is searchable by whoever may search its space (`drop` and
-- `block_source` through full-text only). Withholding is an explicit choice, and a retrieval
-- whose spaces hold a withheld source says so in its warnings.
ALTER TABLE dlp_policies
    ADD COLUMN withheld text[] NOT NULL DEFAULT '{}'
    CHECK (withheld <@ ARRAY['public', 'internal', 'confidential', 'restricted', 'regulated']);
