"""The worked answers of parts one and two's exercises, written once for the tests that need
them (tests/test_exercises.py, tests/test_exercise_feedback.py, tests/learner_pass.py). Part
three's are in tests/test_exercises_pg.py."""

from __future__ import annotations

OPEN = "status IN ('pending', 'leased', 'running', 'retrying')"
FRONTIER_SQL = (
    "SELECT COALESCE(\n"
    "    (SELECT MIN(id) - 1 FROM conversations\n"
    f"      WHERE channel_key = :shard AND id > :base AND {OPEN}),\n"
    "    (SELECT MAX(id) FROM conversations WHERE id > :base AND channel_key = :shard),\n"
    "    :base)"
)
PARTIAL_INDEX = (
    "CREATE INDEX idx_open ON conversations(tenant, channel_key, id) "
    "WHERE status IN ('pending', 'retrying', 'running')"
)
CLOSING = ["timeout", "timeout", "deliver 22", "deliver 23", "deliver 20", "deliver 21"]
VERDICTS = {
    "A": "unknown_ballot",
    "B": "stale_base",
    "C": "commit",
    "D": "stale_watermark",
    "E": "stale_watermark",
}
AFTER_RESTART = {
    "X": 4,
    "A": "unknown_ballot",
    "B": "commit",
    "C": "stale_watermark",
    "D": "unknown_ballot",
}
