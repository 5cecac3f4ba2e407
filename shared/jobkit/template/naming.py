"""How the template names things: the logical IDs of its resources and outputs,
and the names of the deployed resources (``Fn::Sub`` strings on the ``Prefix``
parameter, from :class:`~jobkit.core.resources.ResourceNames`)."""

from __future__ import annotations

from dataclasses import dataclass

from jobkit.core.resources import ResourceNames, logical_id

__all__ = ["NAMES", "QueueIds", "logical_id"]

#: The deployed resources' names, as the template writes them.
NAMES = ResourceNames.sub()
#: The logical ID of the HTTP push endpoint's function (its URL is ``PushEndpointUrl``).
PUSH_ENDPOINT = "PushEndpoint"


@dataclass(frozen=True, slots=True)
class QueueIds:
    """The logical IDs of a declared queue's resources and outputs."""

    name: str

    @property
    def queue(self) -> str:
        return f"{logical_id(self.name)}Queue"

    @property
    def dlq(self) -> str:
        return f"{logical_id(self.name)}DeadLetterQueue"

    @property
    def runner(self) -> str:
        return f"{logical_id(self.name)}Runner"

    @property
    def log_group(self) -> str:
        return f"{self.runner}LogGroup"

    @property
    def event_source_mapping(self) -> str:
        return f"{self.runner}Queue"  # the logical ID SAM gives an SQS event of the function

    @property
    def dead_letters_alarm(self) -> str:
        return f"{logical_id(self.name)}DeadLettersAlarm"

    @property
    def recursion_alarm(self) -> str:
        return f"{self.runner}RecursionAlarm"

    @property
    def oldest_message_alarm(self) -> str:
        return f"{logical_id(self.name)}OldestMessageAlarm"

    @property
    def queue_url_output(self) -> str:
        return f"{self.queue}Url"

    @property
    def queue_arn_output(self) -> str:
        return f"{self.queue}Arn"

    @property
    def dlq_url_output(self) -> str:
        return f"{self.dlq}Url"

    @property
    def dlq_arn_output(self) -> str:
        return f"{self.dlq}Arn"
