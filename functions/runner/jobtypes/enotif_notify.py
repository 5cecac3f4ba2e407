"""enotifNotify: email a watcher that a page changed.

Modelled on MediaWiki's EnotifNotifyJob. Emails are time-critical, so the type
has its own queue and concurrency; it is declared ``deliver_once`` because
sending an email is not idempotent.
"""

from __future__ import annotations

from jobkit import Job, NonRetryableError


class EnotifNotifyJob(Job):
    def run(self) -> bool:
        recipient = self.params["recipient"]
        if "@" not in recipient:
            raise NonRetryableError(f"not an email address: {recipient!r}")
        _send_email(recipient, f"{self.params['page']} was edited by {self.params['editor']}")
        return True


def _send_email(recipient: str, subject: str) -> None:
    """Stand-in for the mailer."""
