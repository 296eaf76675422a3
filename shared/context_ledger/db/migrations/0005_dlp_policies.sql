-- Each organisation's DLP policy (spec: "Embeddings"; README, "DLP"). An organisation without a
-- row uses the defaults in context_ledger/dlp/policy.py. `actions` maps every classification to
-- its action; `patterns` holds the organisation's custom redaction patterns ([{name, pattern}]),
-- validated by the API (RE2 syntax) before they are stored.
CREATE TABLE dlp_policies (
    org_id      uuid PRIMARY KEY REFERENCES organisations (id) ON DELETE CASCADE,
    actions     jsonb NOT NULL CHECK (jsonb_typeof(actions) = 'object'),
    patterns    jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(patterns) = 'array'),
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
