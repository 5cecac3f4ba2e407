"""emailDigest: a digest of a wiki's day, emailed to its watchers' list.

Pushed by a schedule (``[schedules.nightlyDigest]`` in infra/jobs.toml), not by
the app: EventBridge Scheduler sends one job a night straight into the email
queue. Declared ``deliver_once``: sending an email is not idempotent, and each
firing has a job ID of its own, so a second delivery of one firing is caught
while the next night's firing still runs.
"""

from __future__ import annotations

from jobkit import Job, NonRetryableError


class EmailDigestJob(Job):
    def run(self) -> bool:
        recipient = self.params["recipient"]
        if "@" not in recipient:
            raise NonRetryableError("param 'recipient' is not an email address")
        _send_email(recipient, f"What changed on {self.domain or 'the wiki'} ({self.params.get('period', 'daily')})")
        return True

    def error_message(self, error: BaseException) -> str:
        # An address is personal data: only our own messages, which name none, are kept.
        return str(error) if isinstance(error, NonRetryableError) else ""


def _send_email(recipient: str, subject: str) -> None:
    """Stand-in for the mailer."""
