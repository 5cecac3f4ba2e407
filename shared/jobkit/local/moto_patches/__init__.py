"""jobkit's changes to moto: a virtual clock, queues that cost the same at any depth, and more.

Everything here reaches into moto's internals, so it is kept in one place:

- moto reads the time through ``moto.core.utils.utcnow`` (datetimes) and, in
  its SQS models, ``unix_time`` / ``unix_time_millis``; every visibility and
  delay decision goes through those. They are patched to read the clock.
- moto's SQS keeps a queue's messages in a list, ``Queue._messages``, and
  answers almost everything by going through all of it: SendMessage
  computes every attribute of the queue (three scans) to read one setting;
  ReceiveMessage lists every visible message before it takes ten;
  DeleteMessage looks for its receipt handle in every message, twice, and
  ChangeMessageVisibility once; the queue's counts are scans. So each
  message costs O(queue depth), and a backlog of 100,000 costs hours. On
  AWS it costs the same at any depth. :func:`indexed_queues` puts an
  :class:`IndexedMessages` in place of the list: a list to moto's own code,
  which also keeps, at moto's clock, the messages a receive would return,
  the delayed ones and the ones in flight, when each hidden one comes back,
  and every receipt handle each message has had. moto's receive and delete
  use it instead of scanning, and are otherwise moto's, step for step (the
  same order, the same FIFO groups, redrive and retention check); the counts
  are the sizes of its sets. Every answer is the one a scan gives
  (``tests/functional/test_local_depth_equivalence.py`` runs random
  programs of SQS calls on moto with and without it, and compares). It also
  tells when the next hidden message becomes receivable, so a drain jumps
  there instead of polling (:func:`next_visible_at`), and whether a queue
  has anything to receive, so an empty queue costs no request
  (:func:`has_receivable`).
- moto ignores a standard queue's ``MessageGroupId``; SQS fair queues use it
  to deliver quiet tenants' messages ahead of a noisy tenant's backlog. The
  index takes receivable messages as a fair queue would (:class:`~jobkit.local.fair_queues.Tenants`);
  a queue without group IDs keeps moto's order, and a FIFO queue moto's groups.
- moto checks each received message's retention by computing *all* of the
  queue's attributes. :func:`faster_receives` reads the one attribute it
  needs instead; the check is the same.
- moto works the same things out again for every request: the method names
  of the service's response class (by inspecting it), an action's snake-case
  name, a DynamoDB update expression's parse (twice per UpdateItem) and its
  condition's (twice, with the same names and values), a deep copy of the
  parsed tree for each validation, the validation's checks of the parsed
  tree alone (which pass again for the same tree and names), and each
  expression processor's table of node types, at every node of the tree;
  and it draws a receipt handle from its random generator one letter at a
  time, 185 times. :func:`memoised_moto` remembers the answers (each depends
  only on what it is given), copies a parsed tree by unpickling it, and
  draws a handle's letters at once: a DynamoDB update costs about a third
  less, and what moto answers does not change
  (``tests/functional/test_local_depth_memoised_dynamodb.py`` compares).
- moto measures the 12-hour limit on a message's visibility timeout from the
  time the message was *sent*, so a message older than 12 hours can never have
  its visibility changed again, not even to 0. AWS measures it from the receive.
  :func:`aws_visibility_limit` applies AWS's rule.
- moto's DynamoDB evaluates a conditional write's condition and applies the
  write in separate steps, with no lock: two threads can both pass the same
  condition (24 of 30 simultaneous double deliveries of a ``deliver_once``
  job ran twice). On AWS a conditional write is atomic.
  :func:`serial_dynamodb` runs moto's item operations one at a time, so a
  concurrency test means on moto what it means on AWS.
- moto's DynamoDB rolls a transaction back from copies of every table it
  touches, made before every transaction, once per item: a transaction costs
  the whole table. :func:`item_rollback_transactions` copies the items it
  names instead, and puts them back if moto cancels it.
- moto's SQS publishes no CloudWatch metrics. :func:`counting_sends` counts
  the messages each queue accepts (what ``NumberOfMessagesSent`` counts), and
  :func:`oldest_message_age` reads what ``ApproximateAgeOfOldestMessage``
  reports, so the local stack can publish them itself.
- moto's CloudWatch computes no percentile: GetMetricData answers ``p95``
  with a null value (and boto3 then fails to read the response).
  :func:`cloudwatch_percentiles` computes ``pNN`` statistics from the raw
  values, nearest-rank; AWS's are approximations from a sketch, within a few
  percent. As on AWS, values sent as statistic sets have no percentiles.
- moto's CloudWatch keeps every datapoint for ever, and GetMetricData scans
  them all. :func:`drop_metric_data_before` forgets the old ones.
- What SQS and DynamoDB refuse or keep that moto does not (:mod:`.sqs_rules`:
  the characters SQS takes, system attributes on batch sends;
  :mod:`.dynamodb_rules`: expression limits), a DynamoDB query that reads one
  partition, not the table (:mod:`.dynamodb_query`), and the Lambda control
  plane a deployed stack shows (:mod:`.lambda_model`: recursion configs,
  event source mappings kept as deployed).

One module per concern of one moto service (``sqs*``, ``dynamodb*``,
``cloudwatch``, ``lambda_model``; ``clock`` and ``memo`` reach into several);
:mod:`.check` lists every moto internal they change or read, and refuses a
moto without them before any is changed.

Other differences of moto's CloudWatch that a reader of its metrics should know:

- GetMetricData cuts periods from ``StartTime`` to the second; AWS rounds a
  recent ``StartTime`` down to the minute, and keeps datapoints sent at
  standard resolution per minute (so AWS's first period can hold up to a
  minute more).
- A query that names dimensions matches datapoints of any namespace with
  that metric name and those dimensions; AWS matches the namespace too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from jobkit.core.clock import VirtualClock
from jobkit.local.moto_patches.check import MotoUnsupported, check_moto
from jobkit.local.moto_patches.clock import moto_on_clock
from jobkit.local.moto_patches.cloudwatch import cloudwatch_percentiles, drop_metric_data_before, percentile
from jobkit.local.moto_patches.dynamodb import serial_dynamodb
from jobkit.local.moto_patches.dynamodb_query import partition_queries
from jobkit.local.moto_patches.dynamodb_rules import dynamodb_rules
from jobkit.local.moto_patches.dynamodb_transactions import item_rollback_transactions
from jobkit.local.moto_patches.lambda_model import lambda_control_plane
from jobkit.local.moto_patches.memo import memoised_moto
from jobkit.local.moto_patches.sqs import SentCounts, aws_visibility_limit, counting_sends, oldest_message_age
from jobkit.local.moto_patches.sqs_index import IndexedMessages, has_receivable, next_visible_at
from jobkit.local.moto_patches.sqs_receive import faster_receives, indexed_queues
from jobkit.local.moto_patches.sqs_rules import sqs_rules

__all__ = [
    "IndexedMessages",
    "MotoUnsupported",
    "SentCounts",
    "aws_visibility_limit",
    "cloudwatch_percentiles",
    "counting_sends",
    "drop_metric_data_before",
    "dynamodb_rules",
    "faster_receives",
    "has_receivable",
    "indexed_queues",
    "item_rollback_transactions",
    "lambda_control_plane",
    "memoised_moto",
    "moto_on_clock",
    "next_visible_at",
    "oldest_message_age",
    "partition_queries",
    "patched_moto",
    "percentile",
    "serial_dynamodb",
    "sqs_rules",
]


@contextlib.contextmanager
def patched_moto(*, clock: VirtualClock | None = None, sent: SentCounts | None = None) -> Iterator[None]:
    """This module's changes to moto, for as long as the block runs; each is
    taken out again on the way out, in the reverse order.

    Args:
        clock: moto reads this clock (a :class:`VirtualClock`), not the system's.
        sent: counts the messages each queue accepts (:func:`counting_sends`).

    Raises:
        MotoUnsupported: the installed moto lacks what these change or read
            (checked first: nothing is changed then).
    """
    check_moto()
    with contextlib.ExitStack() as patches:
        patches.enter_context(indexed_queues())
        patches.enter_context(memoised_moto())
        patches.enter_context(faster_receives())
        patches.enter_context(item_rollback_transactions())  # before serial_dynamodb, which wraps it
        patches.enter_context(serial_dynamodb())
        patches.enter_context(aws_visibility_limit())
        patches.enter_context(cloudwatch_percentiles())
        if sent is not None:
            patches.enter_context(counting_sends(sent))
        if clock is not None:
            patches.enter_context(moto_on_clock(clock))
        # outermost, as AWS's own rules: what they refuse never reaches the counts
        patches.enter_context(sqs_rules())
        patches.enter_context(dynamodb_rules())
        patches.enter_context(partition_queries())
        patches.enter_context(lambda_control_plane())
        yield
