-- Model gateway call log (spec: "Joining a model call to its retrieval"). 0001 created the table;
-- the gateway also records the declared client, whether the call streamed, token usage and how
-- long the context link took. `seq` orders calls for cursor pagination (created_at can tie).
ALTER TABLE model_logs
    ADD COLUMN seq               bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN client_name       text,
    ADD COLUMN client_version    text,
    ADD COLUMN stream            boolean NOT NULL DEFAULT false,
    ADD COLUMN prompt_tokens     integer CHECK (prompt_tokens >= 0),
    ADD COLUMN completion_tokens integer CHECK (completion_tokens >= 0),
    ADD COLUMN total_tokens      integer CHECK (total_tokens >= 0),
    ADD COLUMN link_latency_ms   integer CHECK (link_latency_ms >= 0),
    ADD CONSTRAINT model_logs_endpoint CHECK (endpoint IN ('chat.completions', 'embeddings'));

-- Listings run newest first within one organisation: by retrieval (the spec's filter), by
-- caller (a person sees their own calls), or all of them (auditors).
DROP INDEX model_logs_context;
CREATE INDEX model_logs_context ON model_logs (org_id, context_request_id, created_at DESC, seq DESC);
CREATE INDEX model_logs_user ON model_logs (org_id, user_id, created_at DESC, seq DESC);
CREATE INDEX model_logs_org ON model_logs (org_id, created_at DESC, seq DESC);
