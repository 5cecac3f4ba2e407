"""A Lambda context object for running handlers outside Lambda."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from jobkit.core.clock import Clock, SystemClock


@dataclass
class FakeLambdaContext:
    """The attributes Lambda's Python context has, with the remaining time
    counted on a :class:`~jobkit.core.clock.Clock` from when the context was made."""

    function_name: str = "jobkit-runner"
    timeout_s: float = 60.0
    memory_limit_in_mb: int = 256
    region: str = "us-east-1"
    account_id: str = "123456789012"
    clock: Clock = field(default_factory=SystemClock)
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"

    def __post_init__(self) -> None:
        self._deadline = self.clock.now() + self.timeout_s

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/[{self.function_version}]{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self.clock.now()) * 1000))
