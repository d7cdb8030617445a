CREATE TABLE IF NOT EXISTS «id1» (
    id          BIGSERIAL PRIMARY KEY,
    «id2»       TEXT NOT NULL,
    payload     JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT «id1»_uniq UNIQUE («id2», created_at)
);
CREATE INDEX CONCURRENTLY idx_«id1»_«id2» ON «id1» USING btree («id2»);

