"""Builds a runner from a Lambda function's environment.

The deployed stack passes everything the runner needs in environment
variables, so an invocation never looks anything up:

``JOBKIT_DECLARATION``
    the declaration as JSON (``declaration_to_dict``), or ``JOBKIT_CONFIG``: a path to jobs.toml
``JOBKIT_PREFIX``
    the resource name prefix (the stage), overriding the declaration's
``JOBKIT_QUEUE``
    the declared queue this function serves; messages of other types are poison
``JOBKIT_QUEUE_URLS``
    JSON object: SQS queue name -> URL, for the queues the function touches
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from jobkit.core.correlation import install as install_correlation
from jobkit.core.errors import ConfigError
from jobkit.runner import Runner
from jobkit.runner.direct_line import DirectLine
from jobkit.runner.log_level import install as install_log_levels
from jobkit.wiring import Wiring


def runner_from_environment(environ: Mapping[str, str]) -> Runner:
    """Everything a runner container needs, built once: clients, records store, metrics."""
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

    from jobkit.core.metrics import EmfMetrics

    queue = environ.get("JOBKIT_QUEUE")
    if not queue:
        raise ConfigError("$JOBKIT_QUEUE", "", "not set: regenerate template.yaml (`jobkit template`) and deploy it")
    wiring = Wiring.from_environment(environ)
    declaration = wiring.declaration
    # Not named "jobkit": that is the package's own logger, which this one configures.
    logger = Logger(service=environ.get("JOBKIT_SERVICE", declaration.names.runner_service))
    # jobkit's modules log to children of the "jobkit" logger; give it Powertools'
    # JSON handler, so their records carry job_id, job_type and domain as keys.
    logging.getLogger("jobkit")
    copy_config_to_registered_loggers(source_logger=logger, include={"jobkit"})
    # A type's log_level quiets its lines, jobkit's and (via the root logger) its job code's.
    levels = {name: job_type.log_level for name, job_type in declaration.types.items()}
    handlers = [*logging.getLogger("jobkit").handlers, *logging.getLogger().handlers]
    install_log_levels(levels, handlers)
    # Every line logged while a job runs carries its correlation_id (its job code's too).
    install_correlation(handlers)
    runner = wiring.runner(queue, metrics=EmfMetrics(declaration.namespace))
    # each job's INFO line, byte for byte as the handler writes it, without logging's machinery
    runner.direct_line = DirectLine.calibrated(logging.getLogger("jobkit.runner.loop"))
    return runner
