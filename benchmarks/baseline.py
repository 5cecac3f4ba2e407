"""The machine's own speed, as a yardstick for the budgets that would
otherwise be absolute wall times.

This machine is shared and its speed varies (by 2.5x between runs), so a wall
time on its own says as much about the neighbours as about jobkit. The
baseline is the plainest work the soak does, measured in the same run: SQS
messages through plain moto, in process, with boto3 and no jobkit (a
SendMessageBatch of 10, a ReceiveMessage of 10 and a DeleteMessageBatch, per
10 messages). A budget then divides a figure by it: the soak's seconds per
job over the baseline's seconds per message.

    python benchmarks/baseline.py [--messages 5000]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

BATCH = 10


def run(messages: int = 5_000, rounds: int = 3) -> dict[str, Any]:
    """Milliseconds per message of the send, receive and delete loop: the
    median of ``rounds`` runs of ``messages`` each."""
    import statistics

    import boto3
    from moto import mock_aws

    per_message = []
    for _ in range(rounds):
        with mock_aws():
            sqs = boto3.client("sqs", region_name="us-east-1")
            url = sqs.create_queue(QueueName="baseline")["QueueUrl"]
            body = json.dumps({"v": 1, "type": "noop", "id": "x" * 36, "params": {"n": 1}})
            began = time.perf_counter()
            for _ in range(0, messages, BATCH):
                entries = [{"Id": str(n), "MessageBody": body} for n in range(BATCH)]
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
                received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=BATCH).get("Messages", [])
                if received:
                    deletes = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(received)]
                    sqs.delete_message_batch(QueueUrl=url, Entries=deletes)
            per_message.append((time.perf_counter() - began) * 1000 / messages)
    return {"messages": messages, "rounds": rounds, "ms_per_message": round(statistics.median(per_message), 4)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5_000)
    print(json.dumps(run(parser.parse_args().messages), indent=2))
