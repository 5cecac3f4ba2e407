"""What ``jobkit verify`` reads back from the account for each queue, against
the declaration: the redrive policy, the runner's recursion setting and event
source mapping, and the queue's alarms; of each of its priority lanes too."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

from jobkit.core.resources import RUNNER_RECURSIVE_LOOP
from jobkit.declaration.config import Declaration, QueueConfig
from jobkit.ops.verify.check import Check, Clients, call, refused


class WiringChecks:
    """The read-back checks of one stack; the alarms are listed once for all queues."""

    def __init__(self, declaration: Declaration, clients: Clients, url: Callable[[str], str]) -> None:
        self._declaration = declaration
        self._clients = clients
        self._url = url
        self._alarm_cache: list[dict[str, Any]] | None = None

    def checks(self, queue: QueueConfig) -> list[Check]:
        """The redrive policy, recursion setting, event source mapping and alarms of one queue."""
        return [self._redrive(queue), self._recursion(queue), self._mapping(queue), self._alarms(queue)]

    def _redrive(self, queue: QueueConfig) -> Check:
        """The redrive policy of the queue and of each of its priority lanes (each to its own DLQ)."""
        found, wrong = [], []
        for lane in queue.lanes:
            read = functools.partial(
                self._clients.sqs.get_queue_attributes, QueueUrl=self._url(lane.key), AttributeNames=["RedrivePolicy"]
            )
            attributes = call("sqs:GetQueueAttributes", read)["Attributes"]
            policy = json.loads(attributes.get("RedrivePolicy") or "{}")
            dlq = str(policy.get("deadLetterTargetArn", "")).rsplit(":", 1)[-1]
            count = int(policy.get("maxReceiveCount", 0) or 0)
            expected = self._declaration.dlq_name(lane.key)
            found.append(f"DLQ {dlq or 'none'}, maxReceiveCount {count}")
            if dlq != expected or count != queue.max_receive_count:
                name = self._declaration.queue_name(lane.key)
                wrong.append(f"{name} (declared: {expected}, {queue.max_receive_count})")
        detail = "; ".join(found)
        if wrong:
            detail += (
                f": {', '.join(wrong)}: deploy the current template, which sets it (a policy changed by hand changes"
                " how many attempts a job gets)"
            )
        return Check("redrive policy", queue.name, not wrong, detail)

    def _recursion(self, queue: QueueConfig) -> Check:
        function = self._declaration.names.runner(queue.name)
        try:
            setting = self._clients.lambda_.get_function_recursion_config(FunctionName=function).get("RecursiveLoop")
        except Exception as exc:
            return Check(
                "recursive loop", queue.name, False, refused(exc, "lambda:GetFunctionRecursionConfig", function)
            )
        ok = setting == RUNNER_RECURSIVE_LOOP
        detail = f"{function}: RecursiveLoop {setting}"
        if not ok:
            detail += f": chains of hops stop at their 16th round; deploy with RecursiveLoop: {RUNNER_RECURSIVE_LOOP}"
        return Check("recursive loop", queue.name, ok, detail)

    def _mapping(self, queue: QueueConfig) -> Check:
        """The event source mapping of the queue, and of each of its priority lanes, to its runner."""
        function = self._declaration.names.runner(queue.name)
        try:
            mappings = self._clients.lambda_.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
        except Exception as exc:
            return Check("event source", queue.name, False, refused(exc, "lambda:ListEventSourceMappings", function))
        details, problems, first = [], [], None
        for lane in queue.lanes:
            queue_name = self._declaration.queue_name(lane.key)
            mine = [m for m in mappings if str(m.get("EventSourceArn", "")).endswith(f":{queue_name}")]
            if not mine:
                problems.append(f"no event source mapping from {queue_name} to {function}")
                continue
            found = {
                "state": mine[0].get("State"),
                "batch_size": mine[0].get("BatchSize"),
                "max_concurrency": (mine[0].get("ScalingConfig") or {}).get("MaximumConcurrency"),
                "batch_item_failures": "ReportBatchItemFailures" in (mine[0].get("FunctionResponseTypes") or []),
            }
            first = found if first is None else first
            wanted = {
                "state": "Enabled",
                "batch_size": queue.batch_size,
                "max_concurrency": lane.max_concurrency,
                "batch_item_failures": True,
            }
            wrong = [f"{k} {found[k]} (declared {wanted[k]})" for k in wanted if found[k] != wanted[k]]
            where = "" if lane.priority is None else f"lane {lane.priority}: "
            failures = "on" if found["batch_item_failures"] else "off"
            details.append(
                f"{where}{found['state']}, batch size {found['batch_size']}, MaximumConcurrency"
                f" {found['max_concurrency']}, ReportBatchItemFailures {failures}"
            )
            if wrong:
                problem = f"{where}{'; '.join(wrong)}: deploy the current template"
                if found["state"] != "Enabled":
                    problem += " (or enable it: aws lambda update-event-source-mapping --uuid ... --enabled)"
                problems.append(problem)
        detail = "; ".join(details + problems) if problems else "; ".join(details)
        return Check("event source", queue.name, not problems, detail, first or {})

    def _alarms(self, queue: QueueConfig) -> Check:
        wanted = [
            alarm
            for lane in queue.lanes  # each priority lane has its own
            for alarm in (
                ("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": self._declaration.dlq_name(lane.key)}),
                ("AWS/SQS", "ApproximateAgeOfOldestMessage", {"QueueName": self._declaration.queue_name(lane.key)}),
            )
        ]
        wanted.append(
            ("AWS/Lambda", "RecursiveInvocationsDropped", {"FunctionName": self._declaration.names.runner(queue.name)})
        )
        try:
            alarms = list(self._all_alarms())
        except Exception as exc:
            return Check("alarms", queue.name, False, refused(exc, "cloudwatch:DescribeAlarms", "alarms"))
        missing, alarming = [], []
        for namespace, metric, dimensions in wanted:
            match = [
                a
                for a in alarms
                if (a.get("Namespace"), a.get("MetricName")) == (namespace, metric)
                and {d["Name"]: d["Value"] for d in a.get("Dimensions", [])} == dimensions
            ]
            if not match:
                missing.append(metric)
            elif any(a.get("StateValue") == "ALARM" for a in match):
                alarming.append(metric)
        ok = not missing and not alarming
        parts = [f"{len(wanted) - len(missing)} of {len(wanted)} found"]
        if missing:
            parts.append("missing: " + ", ".join(missing) + " (deploy the current template)")
        if alarming:
            parts.append(
                "in ALARM: "
                + ", ".join(alarming)
                + " (docs/runbook.md says what each means; a verify run's dead-letter canary in the last few"
                " minutes can set off the DLQ alarm: --no-dead-letter leaves it alone)"
            )
        return Check("alarms", queue.name, ok, "; ".join(parts))

    def _all_alarms(self) -> Iterable[dict[str, Any]]:
        if self._alarm_cache is None:
            paginator = self._clients.cloudwatch.get_paginator("describe_alarms")
            self._alarm_cache = [a for page in paginator.paginate() for a in page.get("MetricAlarms", [])]
        return self._alarm_cache
