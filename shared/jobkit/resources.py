"""Settings of the deployed resources that the template and the local stack share."""

from __future__ import annotations

#: How long a dead letter is kept: the SQS maximum, 14 days.
DLQ_RETENTION_S = 14 * 24 * 3600
#: How long a queued job is kept: 4 days, the SQS default.
QUEUE_RETENTION_S = 4 * 24 * 3600
#: The jobs table's key attributes (both strings) and its TTL attribute.
TABLE_KEYS = ("pk", "sk")
TTL_ATTRIBUTE = "expires_at"
