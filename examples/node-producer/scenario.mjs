// Pushes one of each kind of job to a jobkit stack, and prints their IDs as JSON.
//
//   AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_REGION=us-east-1 node scenario.mjs            # through SQS
//   JOBKIT_PUSH_URL=http://127.0.0.1:4566/jobkit/push AWS_REGION=us-east-1 node scenario.mjs --via http
//
// Through SQS, a malformed job and one with bad params are dead-lettered by the
// runner; through the HTTP endpoint, they are refused at once, with the reason.
//
// With the example declaration (infra/jobs.toml): refreshLinks declares its
// params (infra/schemas/refreshLinks.json); htmlCacheUpdate is a root job that
// fans out into leaves. JOBKIT_PREFIX names the stack (default: jobkit).

import { SQSClient } from "@aws-sdk/client-sqs";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { newJob, now, postJobs, recordRoot, rootParams, rootSignature, sendJobs } from "./jobkit.mjs";

const prefix = process.env.JOBKIT_PREFIX ?? "jobkit";
const viaHttp = process.argv.includes("--via") && process.argv[process.argv.indexOf("--via") + 1] === "http";
const sqs = new SQSClient({});
const dynamodb = new DynamoDBClient({});

/** Send jobs of one type, through SQS or the push endpoint: one answer per job. */
async function send(queue, jobs) {
  if (!viaHttp) return sendJobs(sqs, prefix, queue, jobs);
  const credentials = await sqs.config.credentials();
  const region = await sqs.config.region();
  const answer = await postJobs(process.env.JOBKIT_PUSH_URL, jobs, { credentials, region });
  return answer.jobs.map((a) => ({ id: a.id ?? jobs[a.index].id, enqueued: a.status === "enqueued", error: a.error }));
}

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
pushed.plain = mustEnqueue(await send("refreshLinks", [newJob("refreshLinks", { title: "Node.js" }, { domain: "enwiki" })]));
pushed.delayed = mustEnqueue(
  await send("refreshLinks", [newJob("refreshLinks", { title: "Later" }, { domain: "enwiki", delaySeconds: 2 })]),
);

// Stale leaves of an older edit, then the newer edit's root, in one batch:
// the runner runs the root first, so the stale leaves are superseded.
const edited = now();
const stale = leaves("htmlCacheUpdate:templatelinks:Template:Node", edited - 60, 3);
const newer = root("Template:Node", edited);
mustEnqueue(await send("htmlCacheUpdate", [...stale, newer]));
pushed.sameBatchStaleLeaves = stale.map((j) => j.id);
pushed.sameBatchRoot = [newer.id];

// A root recorded in the jobs table first: stale leaves sent after it are superseded.
// Through SQS, the producer records it (one UpdateItem); the endpoint records the roots it takes.
const recordedKey = "htmlCacheUpdate:templatelinks:Template:Recorded";
if (viaHttp) {
  const recorded = root("Template:Recorded", edited);
  pushed.recordedRoot = mustEnqueue(await send("htmlCacheUpdate", [recorded]));
} else {
  const signature = rootSignature(recordedKey);
  await recordRoot(dynamodb, { prefix, type: "htmlCacheUpdate", domain: "enwiki", signature, timestamp: edited });
}
const late = leaves(recordedKey, edited - 60, 2);
pushed.recordedStaleLeaves = mustEnqueue(await send("htmlCacheUpdate", late));

// A malformed job (params must be an object), and one whose params break the type's schema.
const malformed = newJob("refreshLinks", {}, { domain: "enwiki" });
malformed.body = malformed.body.replace('"params":{}', '"params":"Paris"');
const badParams = newJob("refreshLinks", { page: "Paris" }, { domain: "enwiki" });
const [malformedAnswer, badParamsAnswer] = await send("refreshLinks", [malformed, badParams]);
pushed.malformed = [malformed.id];
pushed.badParams = [badParams.id];
pushed.answers = { malformed: malformedAnswer, badParams: badParamsAnswer };

console.log(JSON.stringify(pushed));
