// Pushes one of each kind of job to a jobkit stack, and prints their IDs as JSON.
//
//   AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_REGION=us-east-1 node scenario.mjs
//
// With the example declaration (infra/jobs.toml): refreshLinks declares its
// params (infra/schemas/refreshLinks.json); htmlCacheUpdate is a root job that
// fans out into leaves. JOBKIT_PREFIX names the stack (default: jobkit).

import { SQSClient } from "@aws-sdk/client-sqs";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { newJob, now, recordRoot, rootParams, rootSignature, sendJobs } from "./jobkit.mjs";

const prefix = process.env.JOBKIT_PREFIX ?? "jobkit";
const sqs = new SQSClient({});
const dynamodb = new DynamoDBClient({});

function leaves(key, timestamp, count) {
  return Array.from({ length: count }, (_, n) =>
    newJob(
      "htmlCacheUpdate",
      { table: "templatelinks", page: key.split(":").pop(), pages: [`Page ${n}`], ...rootParams(key, timestamp, { isSelf: false }) },
      { domain: "enwiki" },
    ),
  );
}

function root(page, timestamp) {
  const key = `htmlCacheUpdate:templatelinks:${page}`;
  const params = { table: "templatelinks", page, recursive: true, range: [0, 100], ...rootParams(key, timestamp) };
  return newJob("htmlCacheUpdate", params, { domain: "enwiki" });
}

function mustEnqueue(answers) {
  const refused = answers.filter((a) => !a.enqueued);
  if (refused.length) throw new Error(`not enqueued: ${JSON.stringify(refused)}`);
  return answers.map((a) => a.id);
}

const pushed = {};

// A plain job, and a delayed one (releaseAt and DelaySeconds).
pushed.plain = mustEnqueue(await sendJobs(sqs, prefix, "refreshLinks", [newJob("refreshLinks", { title: "Node.js" }, { domain: "enwiki" })]));
pushed.delayed = mustEnqueue(
  await sendJobs(sqs, prefix, "refreshLinks", [newJob("refreshLinks", { title: "Later" }, { domain: "enwiki", delaySeconds: 2 })]),
);

// Stale leaves of an older edit, then the newer edit's root, in one batch:
// the runner runs the root first, so the stale leaves are superseded.
const edited = now();
const stale = leaves("htmlCacheUpdate:templatelinks:Template:Node", edited - 60, 3);
const newer = root("Template:Node", edited);
mustEnqueue(await sendJobs(sqs, prefix, "htmlCacheUpdate", [...stale, newer]));
pushed.sameBatchStaleLeaves = stale.map((j) => j.id);
pushed.sameBatchRoot = [newer.id];

// A root recorded in the jobs table first: stale leaves sent after it are superseded.
const recordedKey = "htmlCacheUpdate:templatelinks:Template:Recorded";
await recordRoot(dynamodb, { prefix, type: "htmlCacheUpdate", domain: "enwiki", signature: rootSignature(recordedKey), timestamp: edited });
const late = leaves(recordedKey, edited - 60, 2);
pushed.recordedStaleLeaves = mustEnqueue(await sendJobs(sqs, prefix, "htmlCacheUpdate", late));

// A malformed job (params must be an object), and one whose params break the type's schema.
const malformed = newJob("refreshLinks", {}, { domain: "enwiki" });
malformed.body = malformed.body.replace('"params":{}', '"params":"Paris"');
pushed.malformed = mustEnqueue(await sendJobs(sqs, prefix, "refreshLinks", [malformed]));
pushed.badParams = mustEnqueue(await sendJobs(sqs, prefix, "refreshLinks", [newJob("refreshLinks", { page: "Paris" }, { domain: "enwiki" })]));

console.log(JSON.stringify(pushed));
