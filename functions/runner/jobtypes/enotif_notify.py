"""enotifNotify: email a watcher that a page changed.

Modelled on MediaWiki's EnotifNotifyJob. Emails are time-critical, so the type
has its own queue and concurrency; it is declared ``deliver_once`` because
sending an email is not idempotent.

An address is personal data, and error text is kept (logs, the DLQ, failure
records; see docs/security.md), so no error of this job may quote one.
"""

from __future__ import annotations

from jobkit import Job, NonRetryableError


class EnotifNotifyJob(Job):
    def run(self) -> bool:
        recipient = self.params["recipient"]
        if "@" not in recipient:
            raise NonRetryableError("param 'recipient' is not an email address")
        _send_email(recipient, f"{self.params['page']} was edited by {self.params['editor']}")
        return True

    def error_message(self, error: BaseException) -> str:
        # Our own messages name no address; any other error (the mailer's "550
        # <ann@example.org>: no such user", say) keeps only its class.
        return str(error) if isinstance(error, NonRetryableError) else ""


def _send_email(recipient: str, subject: str) -> None:
    """Stand-in for the mailer."""
