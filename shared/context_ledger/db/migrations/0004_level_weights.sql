-- Organisation overrides of the ranking level weights (spec: "Level weights"). A level without a
-- row uses the operator's default (KEYSTONE_CONTEXT_LEVEL_WEIGHTS over the spec's). The primary
-- key serves retrieval's one lookup per request: every override of one organisation.
CREATE TABLE level_weight_overrides (
    org_id      uuid NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    level       text NOT NULL CHECK (level IN ('organisation', 'business_unit', 'department',
                    'group', 'team', 'project', 'subproject', 'personal')),
    weight      numeric(6, 4) NOT NULL CHECK (weight > 0 AND weight <= 10),
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, level)
);
