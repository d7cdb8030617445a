WITH recent AS (
    SELECT «id1», count(*) AS n, percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms) AS p99
    FROM requests
    WHERE created_at > now() - interval '«x1» hours' AND status <> 'it''s cancelled'
    GROUP BY «id1»
)
SELECT r.*, s.«id2» FROM recent r LEFT JOIN sessions s USING («id1») ORDER BY p99 DESC LIMIT «x2»;

