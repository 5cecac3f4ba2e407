"""The runner: turns an SQS event into job runs and reports partial batch failures.

- :mod:`jobkit.runner.loop`: the :class:`Runner`, a loop over stages;
- :mod:`jobkit.runner.stage`: what a stage is (admit, start, finish, settle);
- :mod:`jobkit.runner.stages`: the stages, and the order they are wired in;
- :mod:`jobkit.runner.delivery`: one delivery of a job, and the ports;
- :mod:`jobkit.runner.failures`: retries, dead letters and poison;
- :mod:`jobkit.runner.attempts`: which attempt a delivery is;
- :mod:`jobkit.runner.requeue`: delay hops and deferrals.
"""

from jobkit.runner.delivery import Delivery, LambdaContext, MetricsPort, QueuePort
from jobkit.runner.loop import Runner
from jobkit.runner.stage import Run, Stage

__all__ = ["Delivery", "LambdaContext", "MetricsPort", "QueuePort", "Run", "Runner", "Stage"]
