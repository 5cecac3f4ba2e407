// A jobkit producer in Node.js, written from docs/wire-format.md alone.
//
// It builds job bodies, sends them to a type's queue with SendMessageBatch
// (10 at a time, one answer per job), and records roots in the jobs table with
// the one UpdateItem request the wire format documents.

import { createHash, randomUUID } from "node:crypto";
import { SendMessageBatchCommand, GetQueueUrlCommand } from "@aws-sdk/client-sqs";
import { UpdateItemCommand } from "@aws-sdk/client-dynamodb";

const ROOT_RECORD_TTL_S = 28 * 24 * 3600; // MediaWiki's root-job TTL
const MAX_DELAY_S = 900; // SQS's DelaySeconds limit

/** The SQS queue of a type: `{prefix}-{queue}`; the queue is the type's name unless jobs.toml says otherwise. */
export function queueName(prefix, queue) {
  return `${prefix}-${queue}`;
}

/** A root job's signature: the SHA-1 of its key's UTF-8 bytes, in lowercase hex. */
export function rootSignature(key) {
  return createHash("sha1").update(key, "utf8").digest("hex");
}

/** The params that make a job a root job (rootJobIsSelf), or a leaf of one (isSelf = false). */
export function rootParams(key, timestamp, { isSelf = true } = {}) {
  const params = { rootJobSignature: rootSignature(key), rootJobTimestamp: timestamp };
  return isSelf ? { rootJobIsSelf: true, ...params } : params;
}

/** Seconds since the epoch, with the fraction: the wire format's times. */
export function now() {
  return Date.now() / 1000;
}

/**
 * A job: its body, and the DelaySeconds to send it with.
 * A delay sets both releaseAt (the time it may run) and DelaySeconds (at most 900).
 */
export function newJob(type, params, { domain = null, delaySeconds = 0, removeDuplicates, id = randomUUID() } = {}) {
  const enqueuedAt = now();
  const body = { v: 1, id, type, domain, params, enqueuedAt, releaseAt: null };
  if (delaySeconds > 0) body.releaseAt = enqueuedAt + delaySeconds;
  if (removeDuplicates !== undefined) body.removeDuplicates = removeDuplicates;
  return { id, type, body: JSON.stringify(body), delaySeconds: Math.min(MAX_DELAY_S, Math.ceil(delaySeconds)) };
}

const urls = new Map();

async function queueUrl(sqs, name) {
  if (!urls.has(name)) {
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: name }));
    urls.set(name, QueueUrl);
  }
  return urls.get(name);
}

/**
 * Send jobs to their queue, 10 to a request. Resolves to one answer per job,
 * in order: { id, enqueued: true } or { id, enqueued: false, error }.
 * (A real app retries the failed ones; SQS names each failure.)
 */
export async function sendJobs(sqs, prefix, queue, jobs) {
  const url = await queueUrl(sqs, queueName(prefix, queue));
  const answers = [];
  for (let start = 0; start < jobs.length; start += 10) {
    const batch = jobs.slice(start, start + 10);
    const entries = batch.map((job, n) => ({
      Id: String(n),
      MessageBody: job.body,
      DelaySeconds: job.delaySeconds || undefined,
      MessageAttributes: { JobType: { DataType: "String", StringValue: job.type } },
    }));
    const result = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries }));
    const failed = new Map((result.Failed ?? []).map((f) => [f.Id, `${f.Code}: ${f.Message ?? ""}`]));
    batch.forEach((job, n) => {
      const error = failed.get(String(n));
      answers.push(error ? { id: job.id, enqueued: false, error } : { id: job.id, enqueued: true });
    });
  }
  return answers;
}

/**
 * Record a root in the jobs table, so the leaves of older roots with the same
 * signature are superseded from now on. `type` is the leaves' type. Resolves
 * to true if this root is now the newest recorded, false if a newer one was.
 */
export async function recordRoot(dynamodb, { prefix, type, domain = null, signature, timestamp }) {
  try {
    await dynamodb.send(
      new UpdateItemCommand({
        TableName: `${prefix}-jobs`,
        Key: {
          pk: { S: `${type}#root#${signature}` },
          sk: { S: domain === null ? "-" : `=${domain}` },
        },
        UpdateExpression: "SET #ts = :ts, #exp = :exp",
        ConditionExpression: "attribute_not_exists(#ts) OR #ts < :ts",
        ExpressionAttributeNames: { "#ts": "root_ts", "#exp": "expires_at" },
        ExpressionAttributeValues: {
          ":ts": { N: String(timestamp) },
          ":exp": { N: String(Math.floor(now()) + ROOT_RECORD_TTL_S) },
        },
      }),
    );
    return true;
  } catch (error) {
    if (error.name === "ConditionalCheckFailedException") return false; // a newer root is recorded
    throw error;
  }
}

/**
 * Push jobs through the HTTP push endpoint (docs/push-endpoint.md), signed with
 * SigV4 for the service "lambda" (a function URL with IAM auth). Resolves to
 * the endpoint's answer: { enqueued, refused, failed, jobs: [{ index, id, status, error? }] }.
 */
export async function postJobs(url, jobs, { credentials, region }) {
  const { SignatureV4 } = await import("@smithy/signature-v4");
  const { Hash } = await import("@smithy/hash-node");
  const target = new URL(url);
  const body = JSON.stringify({ jobs: jobs.map((job) => JSON.parse(job.body)) });
  const signer = new SignatureV4({ credentials, region, service: "lambda", sha256: Hash.bind(null, "sha256") });
  const request = await signer.sign({
    method: "POST",
    protocol: target.protocol,
    hostname: target.hostname,
    port: target.port ? Number(target.port) : undefined,
    path: target.pathname,
    headers: { host: target.host, "content-type": "application/json" },
    body,
  });
  const response = await fetch(url, { method: "POST", headers: request.headers, body });
  const answer = await response.json();
  if (response.status !== 200 && response.status !== 207) {
    throw new Error(`push endpoint answered ${response.status}: ${answer.error}`);
  }
  return answer;
}
