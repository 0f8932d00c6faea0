/**
 * The docs against the code. Every default and deployed figure a page states is held against the
 * code's own exports, cdk.json and the synthesized templates (synthesized once, bundling skipped):
 * nothing here types a number the code owns. The context keys of docs/configuration.md are exactly
 * the keys the code reads; the CLIs' option defaults are the CLIs'; every relative link of README.md
 * and docs/*.md reaches a file, and every #anchor a heading. A default that moves without its page,
 * or a page that restates a figure wrongly, fails here with the page and the figure named.
 */
import { existsSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, ENV } from '../../functions/shared/config.js';
import { MAX_RECEIVE_COUNT } from '../../functions/shared/sync-queue.js';
import { DEFAULT_PACE_SETTINGS, MAX_RETRY_AFTER_MS, MIN_RETRY_AFTER_MS, SLOW_START_CUT } from '../../functions/shared/provider/pace/pace-state.js';
import { CONNECTION_PACE_HOLD_MS, SYNC_PACE_LEASE_SECONDS } from '../../functions/item-sync/app.js';
import { USERS_BURST_IDS, USERS_HOLD_MS, USERS_IDS_PER_CONNECTION } from '../../functions/item-sync/users-ids.js';
import { CONTEXT_KEYS, NUMBER_RULES, OPTIONAL_NUMBER_RULES, readContentSyncConfig, syncTimeoutSeconds } from '../../infra/context.js';
import { BATCHING_WINDOW_SECONDS, syncEventSourceDeployment, VISIBILITY_FACTOR } from '../../infra/deployment.js';
import { BENCH_DEFAULTS } from '../../dev/bench/bench/options.js';
import { RECONCILER_BENCH_DEFAULTS } from '../../dev/bench/reconciler/index.js';
import { SOAK_DEFAULTS } from '../../dev/bench/soak/options.js';
import { DEFAULT_ITEM_COUNT } from '../../dev/local/story.js';
import { CHANGES_WRITER_OPEN_KEPT_MS, CHANGES_WRITER_STALE_AFTER_MS, CHANGES_WRITER_TIMEOUT_SECONDS } from '../../functions/changes-writer/limits.js';
import { CHUNK_SIZE } from '../../functions/shared/changes/sequencer.js';
import { ITEM_URL_SECONDS } from '../../functions/client-api/items.js';
import { SETTLE_WAITS_MS, SNAPSHOT_OVERLAP, SNAPSHOT_OVERLAP_SECONDS } from '../../functions/shared/changes/feed.js';
import { PAGE_LIMIT } from '../../functions/client-api/routes.js';
import { ACCOUNTS_FULL, ACCOUNTS_SHORT } from '../../dev/sim/accounts-scenario.js';
import { BACKLOG_FULL, BACKLOG_SHORT } from '../../dev/sim/backlog-scenario.js';
import { CONNECTIONS_FULL, CONNECTIONS_SHORT } from '../../dev/sim/connections-scenario.js';
import { DISCOVERY_FULL, DISCOVERY_SHORT } from '../../dev/sim/discovery-scenario.js';
import { FAIRNESS_FULL } from '../../dev/sim/fairness-scenario.js';
import { PUSH_FULL, PUSH_SHORT } from '../../dev/sim/push-scenario.js';
import { CHANGES_FULL, CHANGES_SHORT } from '../../dev/sim/changes-scale.js';
import { RECONCILE_FULL } from '../../dev/sim/reconcile-scale.js';
import { REFRESHER_FULL, REFRESHER_SHORT } from '../../dev/sim/refresher-scenario.js';
import { LIMITS_FULL, OUTAGE_FULL } from '../../dev/sim/scope-scenarios.js';
import { PURGE_SETTLE_SECONDS } from '../../tools/connections/commands.js';
import { DEFAULT_MAX_ATTEMPTS } from '../../tools/enqueue/send.js';
import { JAVA_MIN_MAJOR, JAVA_REQUIRED } from '../../dev/fakes/dynamodb-local.js';
import { DYNAMO_LATENCY_MS, OTHER_OPERATION_MS } from '../../dev/fakes/dynamo-latency.js';
import { simDynamoLatency } from '../../dev/sim/meters.js';
import { BASE_URL, CDK_JSON_CONTEXT, contextErrorFor, readContext, resource, ROOT, synthTemplates, type Templates } from '../infra/helpers.js';
import { anchors, codeSpans, DOC_PAGES, flat, links, page, section, tables, tableWithHeader, toNumber, type Table } from './markdown.js';

// ---- what the code says ----------------------------------------------------------------------------

const KEYS: readonly string[] = Object.values(CONTEXT_KEYS);
const ENV_NAMES = new Map<string, string>(Object.entries(ENV).map(([field, name]) => [name, field]));

/** Every context key's value as the configuration holds it, for `context` (discovery's keys with discovery on). */
function contextValues(context: Record<string, unknown>): Record<string, unknown> {
  const config = readContext(context);
  const discovery = readContext({ ...context, childrenPath: 'probe' }).discovery!;
  return {
    ...config,
    childrenPath: config.discovery?.childrenPath,
    childIdPath: discovery.childIdPath,
    childRevisionPath: discovery.childRevisionPath,
    childrenTotalPath: discovery.childrenTotalPath,
  };
}

/** The code's defaults: the context with nothing but `baseUrl`. */
const CODE_DEFAULTS = contextValues({ baseUrl: BASE_URL });
/** What a deployment gets without `-c`: cdk.json's context. */
const CDK_JSON_DEFAULTS = contextValues({ ...CDK_JSON_CONTEXT, baseUrl: BASE_URL });

/** A value as a page writes it: `none` for no value. */
function shown(value: unknown): string {
  return value === undefined ? 'none' : String(value);
}

function contextDefault(key: string): unknown {
  if (!(key in CODE_DEFAULTS)) throw new Error(`the configuration has no value named ${key}`);
  return CODE_DEFAULTS[key];
}

/** A run-time variable's default (functions/shared/config.ts DEFAULTS); undefined when it has none. */
function envDefault(variable: string): unknown {
  const field = ENV_NAMES.get(variable);
  if (field === undefined) throw new Error(`${variable} is not a variable of functions/shared/config.ts ENV`);
  return (DEFAULTS as Record<string, unknown>)[field];
}

/** What a page means by a default cell or figure: the first word, without backticks (`16777216 (16 MiB)` → 16777216). */
function stated(cell: string): string {
  return cell.replace(/`/g, '').trim().split(/[\s,]/)[0]!;
}

function docTable(path: string, heading: string, header: readonly string[]): Table {
  return tableWithHeader(section(page(path), heading), header);
}

/**
 * `documented` is `key`'s default as infra/context.ts has it and as cdk.json deploys it; `required`:
 * a context without the key fails the synth naming it, and cdk.json does not give it.
 */
function expectContextDefault(path: string, key: string, documented: string): void {
  if (documented === 'required') {
    const without: Record<string, unknown> = { ...CDK_JSON_CONTEXT, baseUrl: BASE_URL };
    delete without[key];
    contextErrorFor(without, key);
    expect(CDK_JSON_CONTEXT, `cdk.json gives the required key ${key} a value`).not.toHaveProperty(key);
    return;
  }
  expect(shown(contextDefault(key)), `${path}: ${key}'s default against infra/context.ts`).toBe(documented);
  expect(shown(CDK_JSON_DEFAULTS[key]), `${path}: ${key}'s default against cdk.json`).toBe(documented);
}

const CONTEXT_TABLE = (): Table => docTable('docs/configuration.md', 'Deploy time (CDK context)', ['key', 'default', 'meaning']);

/** One figure a page states: the first capture of `pattern` in the page's text, line breaks folded. */
function figure(path: string, pattern: RegExp): string[] {
  const m = pattern.exec(flat(page(path)));
  if (!m) throw new Error(`${path} no longer states ${pattern}: reword the check with the page`);
  return m.slice(1);
}

/** Every capture of `pattern` (global) over every page, with the page. */
function everywhere(pattern: RegExp): Array<{ path: string; values: string[] }> {
  return DOC_PAGES.flatMap((path) => [...flat(page(path)).matchAll(pattern)].map((m) => ({ path, values: m.slice(1) })));
}

// ---- the synthesized templates -----------------------------------------------------------------------

let t: Templates;
beforeAll(() => {
  t = synthTemplates();
});

type Resources = Record<string, { Type: string; Properties?: Record<string, any> }>;

function allResources(): Array<[string, { Type: string; Properties?: Record<string, any> }]> {
  return [t.statefulTemplate, t.statelessTemplate].flatMap((template) => Object.entries(template.toJSON().Resources as Resources));
}

function count(type: string): number {
  return allResources().filter(([, r]) => r.Type === type).length;
}

const fn = (prefix: string) => resource(t.statelessTemplate, 'AWS::Lambda::Function', prefix).Properties;
const queue = (prefix: string) => resource(t.statefulTemplate, 'AWS::SQS::Queue', prefix).Properties;

function syncEventSources(): Array<Record<string, any>> {
  const syncFunction = resource(t.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction').id;
  const sources = allResources()
    .filter(([, r]) => r.Type === 'AWS::Lambda::EventSourceMapping' && JSON.stringify(r.Properties?.['FunctionName']) === JSON.stringify({ Ref: syncFunction }))
    .map(([, r]) => r.Properties!);
  expect(sources).toHaveLength(2);
  return sources;
}

/** The change-events function's event source on the items table's stream (the other is the connections table's). */
function changeEventsSource(): Record<string, any> {
  return resource(t.statelessTemplate, 'AWS::Lambda::EventSourceMapping', 'ChangeEventsFunctionDynamoDBEventSourceContentSyncStatefulItemsTable').Properties;
}

const DAY = 86_400;

// ---- the context keys -------------------------------------------------------------------------------

describe('docs/configuration.md: the CDK context keys', () => {
  it('lists every key the code reads, and nothing else; cdk.json holds no other key', () => {
    const asked = new Set<string>();
    readContentSyncConfig({
      tryGetContext: (key) => {
        asked.add(key);
        return key === CONTEXT_KEYS.baseUrl ? BASE_URL : undefined;
      },
    });
    const read = [...new Set([...KEYS, ...asked])].sort();
    const listed = CONTEXT_TABLE().rows.map((row) => stated(row[0]!));
    expect([...listed].sort()).toEqual(read);
    expect(new Set(listed).size).toBe(listed.length);

    // cdk.json's context: the keys above, CDK's feature flags (`@aws-cdk/…`) and the CLI's own setting.
    const ours = Object.keys(CDK_JSON_CONTEXT).filter((key) => !key.startsWith('@') && key !== 'cli-telemetry');
    expect(ours.filter((key) => !read.includes(key))).toEqual([]);
  });

  it("states each key's default as the code has it and as cdk.json deploys it", () => {
    for (const row of CONTEXT_TABLE().rows) expectContextDefault('docs/configuration.md', stated(row[0]!), stated(row[1]!));
  });

  it("states each numeric key's range as infra/context.ts checks it", () => {
    const meaning = new Map(CONTEXT_TABLE().rows.map((row) => [stated(row[0]!), row[2]!]));
    for (const [key, { min, max }] of Object.entries({ ...NUMBER_RULES, ...OPTIONAL_NUMBER_RULES })) {
      expect(meaning.get(key), `docs/configuration.md: ${key}'s range`).toContain(`${min}–${max}`);
    }
  });
});

describe('every table of defaults, on any page', () => {
  it('states the default of each context key and variable it lists as the code has it', () => {
    let rows = 0;
    for (const path of DOC_PAGES) {
      for (const table of tables(page(path))) {
        const column = table.header.indexOf('default');
        if (column < 0) continue;
        for (const row of table.rows) {
          const names = codeSpans(row[0]!);
          const documented = row[column]!.split(/, /).map(stated);
          // A row of several variables (`A`, `B`, `C` | x, y, z) states each one's default in order.
          const subjects = names.length > 1 && documented.length === names.length ? names : names.slice(0, 1);
          subjects.forEach((name, i) => {
            if (KEYS.includes(name)) expectContextDefault(path, name, documented[i]!);
            else if (ENV_NAMES.has(name)) expect(shown(envDefault(name)), `${path}: the default of ${name}`).toBe(documented[i]);
            else expect.fail(`${path}: "${name}" in a table of defaults is neither a context key nor a variable`);
            rows += 1;
          });
        }
      }
    }
    expect(rows).toBeGreaterThan(KEYS.length);
  });

  it('docs/configuration.md names every variable the functions read', () => {
    const runTime = section(page('docs/configuration.md'), 'Run time (Lambda environment)');
    for (const variable of Object.values(ENV)) expect(runTime, `docs/configuration.md: ${variable}`).toContain(`\`${variable}\``);
  });
});

describe('defaults restated in prose', () => {
  it("states a context key's default as the code has it, wherever a page calls it the default", () => {
    const keys = KEYS.join('|');
    const patterns = [
      // "the default `usersReservedPercent` 20"
      new RegExp(`default \`(${keys})\` \`?([\\w.]+)\`?`, 'g'),
      // "`logLevel`, default `INFO`"
      new RegExp(`\`(${keys})\`,? default \`?([\\w.]+)\`?`, 'g'),
      // "`tokenRefreshMinutes` T, 30 by default", "`paceScope` `client`, the default"
      new RegExp(`\`(${keys})\`(?: [A-Z],)? \`?([\\w.]+)\`?,? (?:by default|the default)`, 'g'),
      // "the context `tokenRefreshMinutes=1` (deployed: 30)"
      new RegExp(`\`(${keys})=[^\`]*\` \\(deployed:? \`?([\\w.]+)`, 'g'),
    ];
    const found = patterns.flatMap((pattern) => everywhere(pattern));
    for (const { path, values } of found) expect(values[1], `${path}: the default of ${values[0]}`).toBe(shown(contextDefault(values[0]!)));
    expect(found.length).toBeGreaterThan(0);
  });

  it("states a variable's default as functions/shared/config.ts has it, wherever a page gives it beside the name", () => {
    const units: Record<string, number> = { '': 1, s: 1, ms: 1, minutes: 60, MiB: 1024 * 1024 };
    // "`REFRESH_CONCURRENCY` (10)", "`CONNECTION_WAIT_SECONDS`, 300", "`PROVIDER_MAX_RESPONSE_BYTES`, 16 MiB by default"
    // and "`CONNECTION_WAIT_SECONDS=2` (deployed: 300, …)"
    const found = [
      ...everywhere(/`([A-Z][A-Z0-9_]{3,})`(?:, | \()(\d[\d,]*)(?: (s|ms|minutes|MiB)\b)?/g),
      ...everywhere(/`([A-Z][A-Z0-9_]{3,})=[^`]*` \(deployed:? (\d[\d,]*)(?: (s|ms|minutes|MiB)\b)?/g),
    ].filter(({ values }) => ENV_NAMES.has(values[0]!));
    for (const { path, values } of found) {
      const [variable, amount, unit] = values;
      expect(toNumber(amount!) * units[unit ?? '']!, `${path}: ${variable} ${amount} ${unit ?? ''}`).toBe(envDefault(variable!));
    }
    expect(found.length).toBeGreaterThan(5);
  });
});

// ---- what the stacks deploy ---------------------------------------------------------------------------

describe('the item reads and the changes feed, as the pages state them', () => {
  it("states the presigned URL's life, the page limit, the writer's chunk and stale rows, the snapshot's overlap and the reader's waits as the code has them", () => {
    const [minutes] = figure('docs/client-api.md', /valid (\d+) minutes \(`ITEM_URL_SECONDS`/);
    expect(Number(minutes) * 60).toBe(ITEM_URL_SECONDS);
    const [least, most, byDefault] = figure('docs/client-api.md', /`limit` is (\d+)–(\d+), (\d+) by default/);
    expect([Number(least), toNumber(most!), Number(byDefault)]).toEqual([1, PAGE_LIMIT.max, PAGE_LIMIT.default]);
    const [chunk] = figure('docs/changes.md', /up to `CHUNK_SIZE` \((\d+)\) changes/);
    expect(Number(chunk)).toBe(CHUNK_SIZE);
    const [stale, timeout] = figure('docs/changes.md', /written more than (\d+) s ago \(`CHANGES_WRITER_STALE_AFTER_MS`: the writer's (\d+) s time-out/);
    expect([Number(stale) * 1000, Number(timeout)]).toEqual([CHANGES_WRITER_STALE_AFTER_MS, CHANGES_WRITER_TIMEOUT_SECONDS]);
    const [overlapMinutes, overlapSeconds, overlap] = figure('docs/changes.md', /in the last (\d+) minutes\s+\(`SNAPSHOT_OVERLAP_SECONDS`, (\d+)\), up to `SNAPSHOT_OVERLAP`, (\d+),/);
    expect([Number(overlapMinutes) * 60, Number(overlapSeconds), Number(overlap)]).toEqual([SNAPSHOT_OVERLAP_SECONDS, SNAPSHOT_OVERLAP_SECONDS, SNAPSHOT_OVERLAP]);
    const [kept] = figure('docs/changes.md', /open for (\d+) s, `CHANGES_WRITER_OPEN_KEPT_MS`/);
    expect(Number(kept) * 1000).toBe(CHANGES_WRITER_OPEN_KEPT_MS);
    const [a, b, c] = figure('docs/changes.md', /waits of (\d+), (\d+) and (\d+) ms \(`SETTLE_WAITS_MS`/);
    expect([a, b, c].map(Number)).toEqual([...SETTLE_WAITS_MS]);
  });
});

describe('what the stacks deploy, as the pages state it', () => {
  it('counts the queues, tables, bucket and functions the templates hold', () => {
    const [queues, tablesCount, buckets, functions] = figure('docs/scale.md', /same resources: (\w+) queues .*?\), (\w+) tables, (\w+) bucket, (\w+) functions/);
    expect(toNumber(queues!)).toBe(count('AWS::SQS::Queue'));
    expect(toNumber(tablesCount!)).toBe(count('AWS::DynamoDB::Table'));
    expect(toNumber(buckets!)).toBe(count('AWS::S3::Bucket'));
    expect(toNumber(functions!)).toBe(count('AWS::Lambda::Function'));
    const [retained] = figure('docs/operations.md', /the items bucket, the (\w+) queues \(/);
    expect(toNumber(retained!)).toBe(count('AWS::SQS::Queue'));
    const [stacksTables] = figure('docs/stacks.md', /a stateful stack \(the (\w+) tables/);
    expect(toNumber(stacksTables!)).toBe(count('AWS::DynamoDB::Table'));
  });

  it("deletes every retained queue in docs/operations.md's loop: each queue URL the stateful stack outputs", () => {
    const loop = /for queue in ([^;]+); do\s+aws sqs delete-queue/.exec(page('docs/operations.md'))?.[1] ?? '';
    const named = [...loop.matchAll(/<(\w+)>/g)].map((match) => match[1]!).sort();
    const outputs = Object.keys(t.statefulTemplate.toJSON().Outputs as Record<string, unknown>).filter((name) => name.endsWith('QueueUrl')).sort();
    expect(outputs).toHaveLength(count('AWS::SQS::Queue'));
    expect(named).toEqual(outputs);
  });

  it("gives each function the memory and time-out docs/stacks.md states (the item sync's: its context keys' defaults)", () => {
    for (const [name, prefix] of [['the token refresher', 'TokenRefresherFunction'], ['the reconciler', 'ReconcilerFunction'], ['the change-events function', 'ChangeEventsFunction'], ['the changes writer', 'ChangesWriterFunction']] as const) {
      const [memory, timeout] = figure('docs/stacks.md', new RegExp(`- ${name} \\((\\d+) MB, (\\d+) s\\b`));
      expect(Number(memory), `docs/stacks.md: ${name}'s memory`).toBe(fn(prefix)['MemorySize']);
      expect(Number(timeout), `docs/stacks.md: ${name}'s time-out`).toBe(fn(prefix)['Timeout']);
    }
    const sync = fn('ItemSyncFunction');
    expect(sync['MemorySize']).toBe(contextDefault('syncMemorySize'));
    expect(sync['Timeout']).toBe(syncTimeoutSeconds(contextDefault('syncBatchSize') as number));
    const [runtime, arch] = figure('docs/stacks.md', /Every function runs Node\.js (\d+) on (\w+)/);
    for (const [, r] of allResources().filter(([, r]) => r.Type === 'AWS::Lambda::Function')) {
      expect(r.Properties!['Runtime']).toBe(`nodejs${runtime}.x`);
      expect(r.Properties!['Architectures']).toEqual([arch]);
    }
  });

  it("feeds the item sync as the context keys' defaults and docs/configuration.md's batching window and time-out say", () => {
    for (const source of syncEventSources()) {
      expect(source['BatchSize']).toBe(contextDefault('syncBatchSize'));
      expect(source['ScalingConfig']).toEqual({ MaximumConcurrency: contextDefault('syncMaxConcurrency') });
      expect(source['MaximumBatchingWindowInSeconds']).toBe(BATCHING_WINDOW_SECONDS);
    }
    const [above, window] = figure('docs/configuration.md', /above (\d+) the event source waits up to (\d+) s to fill a batch/);
    expect(Number(window)).toBe(BATCHING_WINDOW_SECONDS);
    const at = (syncBatchSize: number) => syncEventSourceDeployment({ syncBatchSize, syncMaxConcurrency: 2 }).maxBatchingWindowSeconds;
    expect(at(Number(above))).toBeUndefined();
    expect(at(Number(above) + 1)).toBe(BATCHING_WINDOW_SECONDS);
    const [seconds, records, step, most, factor] = figure(
      'docs/configuration.md',
      /time-out follows it: (\d+) s up to (\d+) records, then (\d+) s per 10 \(at most (\d+) s\); each queue's visibility time-out is (\d+)× that/,
    ).map(Number);
    expect(syncTimeoutSeconds(records!)).toBe(seconds);
    expect(syncTimeoutSeconds(records! + 10)).toBe(seconds! + step!);
    expect(syncTimeoutSeconds(NUMBER_RULES.syncBatchSize.max)).toBe(most);
    expect(factor).toBe(VISIBILITY_FACTOR);
    // Wherever a page says how long an id sent to a quiet queue may wait: the batching window.
    const waits = everywhere(/quiet queue waits up to (a second|\d+ s)/g);
    expect(waits.length).toBeGreaterThan(1);
    for (const { path, values } of waits) expect(toNumber(values[0]!.replace(/ s$/, '').replace(/^a second$/, 'one')), path).toBe(BATCHING_WINDOW_SECONDS);
    const [batches] = figure('README.md', /Batches of (\d+) make it so/);
    expect(Number(batches)).toBe(contextDefault('syncBatchSize'));
  });

  it('keeps the work queues as docs/stacks.md and the runbook say', () => {
    const [retention, deadLetter, receives, factor] = figure('docs/stacks.md', /(\d+) days' retention, dead-letter queues (\d+) days, `maxReceiveCount` (\d+), visibility (\d+)× the sync's time-out/);
    const syncTimeout = fn('ItemSyncFunction')['Timeout'] as number;
    for (const prefix of ['SyncQueue', 'ReconcileQueue']) {
      expect(queue(prefix)['MessageRetentionPeriod']).toBe(Number(retention) * DAY);
      expect(queue(prefix)['RedrivePolicy']['maxReceiveCount']).toBe(Number(receives));
      expect(queue(prefix)['VisibilityTimeout']).toBe(Number(factor) * syncTimeout);
    }
    for (const prefix of ['DeadLetterQueue', 'ReconcileDeadLetterQueue']) expect(queue(prefix)['MessageRetentionPeriod']).toBe(Number(deadLetter) * DAY);
    const [failureQueue] = figure('docs/stacks.md', /the change-events failure queue \((\d+) days\)/);
    expect(queue('ChangeEventsFailureQueue')['MessageRetentionPeriod']).toBe(Number(failureQueue) * DAY);
    const [kept] = figure('docs/operations.md', /The sync queue keeps a message (\d+) days/);
    expect(Number(kept) * DAY).toBe(queue('SyncQueue')['MessageRetentionPeriod']);

    // Every page that counts the receives before the dead-letter queue.
    const counted = [
      ...everywhere(/\b(?:[Aa]fter|fails|failed) (\d+|five) (?:failed )?(?:deliveries|receives)\b/g),
      ...everywhere(/maxReceiveCount[`*]* (?:stays )?(\d+)/g),
      ...everywhere(/handed (?:it |them )?(\d+|five) times/g),
      ...everywhere(/fails the same way (\d+) times/g),
    ];
    expect(counted.length).toBeGreaterThan(5);
    for (const { path, values } of counted) expect(toNumber(values[0]!), `${path}: receives before the dead-letter queue`).toBe(MAX_RECEIVE_COUNT);
    expect(queue('SyncQueue')['RedrivePolicy']['maxReceiveCount']).toBe(MAX_RECEIVE_COUNT);

    const [times, minutes] = figure('docs/provider-pace.md', /a visibility timeout of (\d+) × the function time-out, (\d+) min by default/);
    expect(Number(times)).toBe(VISIBILITY_FACTOR);
    expect(Number(minutes) * 60).toBe(queue('SyncQueue')['VisibilityTimeout']);
    const [after, aboutMinutes] = figure('docs/large-items.md', /after (\d+) \(`maxReceiveCount`, about (\d+) minutes with the default time-out\)/);
    expect(Number(after)).toBe(MAX_RECEIVE_COUNT);
    expect(Number(aboutMinutes) * 60).toBe(MAX_RECEIVE_COUNT * queue('SyncQueue')['VisibilityTimeout']);
  });

  it('feeds the change-events function and schedules the others as the pages say', () => {
    const [batch, retries] = figure('docs/stacks.md', /fed by the items table's stream \(batches of (\d+), from the oldest record, bisected on error, (\d+) retries/);
    const stream = changeEventsSource();
    expect(stream['BatchSize']).toBe(Number(batch));
    expect(stream['MaximumRetryAttempts']).toBe(Number(retries));
    expect(stream['StartingPosition']).toBe('TRIM_HORIZON');
    expect(stream['BisectBatchOnFunctionError']).toBe(true);
    const [retriedUpTo] = figure('docs/change-events.md', /retries them up to (\d+) times/);
    expect(stream['MaximumRetryAttempts']).toBe(Number(retriedUpTo));

    const schedule = (prefix: string) => resource(t.statelessTemplate, 'AWS::Scheduler::Schedule', prefix).Properties['ScheduleExpression'];
    const [refresherEvery] = figure('docs/stacks.md', /at most \d+ s\), run every (\d+) minutes/);
    expect(schedule('TokenRefreshSchedule')).toBe(`rate(${refresherEvery} minutes)`);
    figure('docs/stacks.md', /the reconciler \(\d+ MB, \d+ s\), run every minute/);
    expect(schedule('ReconcileSchedule')).toBe('rate(1 minute)');

    const refresherTimeout = fn('TokenRefresherFunction')['Timeout'];
    for (const [path, pattern] of [
      ['docs/configuration.md', /A token refresher run \(time-out (\d+) s\)/],
      ['docs/connections.md', /\(its time-out is (\d+) s\)/],
      ['docs/connections.md', /the refresher's time-out (\d+) s\)/],
    ] as const) {
      expect(Number(figure(path, pattern)[0]), `${path}: the token refresher's time-out`).toBe(refresherTimeout);
    }
  });

  it('names every alarm the stacks create in the runbook and in the README', () => {
    const alarms = allResources()
      .filter(([, r]) => r.Type === 'AWS::CloudWatch::Alarm')
      .map(([id]) => id.replace(/[0-9A-F]{8}$/, ''))
      .sort();
    const runbook = tableWithHeader(page('docs/operations.md'), ['alarm', 'fires when', 'runbook']).rows.map((row) => stated(row[0]!));
    const paged = tableWithHeader(page('README.md'), ['alarm', 'first action', 'runbook']).rows.map((row) => stated(row[0]!));
    expect([...runbook].sort()).toEqual(alarms);
    expect([...paged].sort()).toEqual(alarms);
  });

  it("holds a record for its connection's pace as long as docs/provider-pace.md says", () => {
    const [seconds] = figure('docs/provider-pace.md', /its connection's \*hold\* at most, \*\*(\d[\d.]*) s\*\* \(`CONNECTION_PACE_HOLD_MS`/).map(Number);
    expect(seconds! * 1000).toBe(CONNECTION_PACE_HOLD_MS);
  });

  it("keeps of a connection's ids in a users' batch what docs/fairness.md says, and moves the rest", () => {
    const [burst, seconds, floor] = figure(
      'docs/fairness.md',
      /up to \*\*(\d+) ids\*\* of one connection in a batch are a user's \(`USERS_BURST_IDS`,.*?within \*\*(\d+) s\*\* \(`USERS_HOLD_MS`\); more are an import's, of which the batch keeps \*\*(\d+)\*\*\s+\(`USERS_IDS_PER_CONNECTION`/s,
    ).map(Number);
    expect(burst).toBe(USERS_BURST_IDS);
    expect(seconds! * 1000).toBe(USERS_HOLD_MS);
    expect(floor).toBe(USERS_IDS_PER_CONNECTION);
  });

  it("waits before a purge as long as docs/connections.md says, from the defaults", () => {
    const [settle, cacheSeconds, syncTimeout, margin, thenPlus] = figure(
      'docs/connections.md',
      /An erase waits until (\d+) seconds after the removal: .*?`ACCESS_TOKEN_CACHE_SECONDS` \((\d+) by default\), .*? until the sync's time-out \((\d+) s at the default `syncBatchSize`\), plus a\s+(\d+)-second margin\. .*? once (\d+) seconds plus that time-out have passed/s,
    ).map(Number);
    expect(settle).toBe(PURGE_SETTLE_SECONDS);
    expect(cacheSeconds).toBe(DEFAULTS.tokenCacheSeconds);
    expect(syncTimeout).toBe(syncTimeoutSeconds(contextDefault('syncBatchSize') as number));
    expect(cacheSeconds! + syncTimeout! + margin!).toBe(PURGE_SETTLE_SECONDS);
    expect(thenPlus).toBe(cacheSeconds! + margin!);
  });

  it("states the provider pace's settings as the item sync and the token pace use them", () => {
    const pace = DEFAULT_PACE_SETTINGS;
    const [syncLease, tokenLease] = figure('docs/provider-pace.md', /the item sync's: (\d[\d.]*) s of the rate, .*?the token refresher's: (\d[\d.]*) s\)/).map(Number);
    expect(syncLease).toBe(SYNC_PACE_LEASE_SECONDS);
    expect(tokenLease).toBe(pace.leaseSeconds);
    expect(Number(figure('docs/scale.md', /takes slots in leases of (\d[\d.]*) s of the rate/)[0])).toBe(SYNC_PACE_LEASE_SECONDS);
    const [initial, first, cut, cooldown] = figure(
      'docs/provider-pace.md',
      /the rate starts at (\d+) requests\/s .*? The first 429 (halves) it .*? Every later 429 cuts the rate ×(\d[\d.]*), .*? At most one cut per (\d+) s/,
    );
    expect([Number(initial), first === 'halves' ? 0.5 : first, Number(cut), Number(cooldown) * 1000]).toEqual([pace.initialRate, SLOW_START_CUT, pace.cutFactor, pace.cutCooldownMs]);
    const [least, most, absent] = figure('docs/provider-pace.md', /Its `Retry-After` \(at least (\d+) s, at most (\d+) h; (\d+) s when absent\)/).map(Number);
    expect([least! * 1000, most! * 3_600_000, absent! * 1000]).toEqual([MIN_RETRY_AFTER_MS, MAX_RETRY_AFTER_MS, pace.defaultRetryAfterMs]);
    const [failures, probe] = figure('docs/provider-pace.md', /add up to (\d+) in a row .*?except \*\*one probe every (\d+) s\*\*/).map(Number);
    expect([failures, probe! * 1000]).toEqual([pace.outageFailures, pace.probeIntervalMs]);
    // The token pace is the same pace, told its ceiling.
    const [tokenCut, tokenCooldown, tokenFailures, tokenProbe] = figure(
      'docs/connections.md',
      /cuts the rate \(×(\d[\d.]*), at most once every (\d+) s\), .*?; (\d+) failed calls in a row .*? one probe every (\d+) seconds/,
    ).map(Number);
    expect([tokenCut, tokenCooldown! * 1000, tokenFailures, tokenProbe! * 1000]).toEqual([pace.cutFactor, pace.cutCooldownMs, pace.outageFailures, pace.probeIntervalMs]);
  });

  it("derives the sweep lane's bound from the defaults as docs/reconciler.md does", () => {
    const [perInvocation, atFirst, invocations, firstMs, atSecond, secondMs] = figure(
      'docs/reconciler.md',
      /at most `syncMaxConcurrency` × (\d+) ÷ latency ids a second: (\d+) by default \((\d+) invocations\) at (\d+) ms, (\d+) at (\d+) ms/,
    ).map(Number);
    const concurrency = contextDefault('syncMaxConcurrency') as number;
    expect(perInvocation).toBe(DEFAULTS.fetchConcurrency);
    expect(invocations).toBe(concurrency);
    expect(atFirst).toBe((concurrency * DEFAULTS.fetchConcurrency * 1000) / firstMs!);
    expect(atSecond).toBe((concurrency * DEFAULTS.fetchConcurrency * 1000) / secondMs!);
  });
});

// ---- the CLIs -----------------------------------------------------------------------------------------

describe("the CLIs' option defaults, as docs/development.md and docs/item-sync.md state them", () => {
  const commands = (): Map<string, string> =>
    new Map(tableWithHeader(page('docs/development.md'), ['command', 'options (defaults)', 'writes to `.bench/`']).rows.map((row) => [codeSpans(row[0]!)[0]!, row[1]!]));

  it.each([
    ['npm run bench', BENCH_DEFAULTS],
    ['npm run soak', SOAK_DEFAULTS],
    ['npm run bench:reconciler', RECONCILER_BENCH_DEFAULTS],
  ] as const)('%s', (command, defaults) => {
    const cell = commands().get(command);
    expect(cell, `docs/development.md has a row for ${command}`).toBeDefined();
    let checked = 0;
    for (const m of cell!.matchAll(/`--([a-z-]+)(?: [A-Z]+)?` \(([^)]*)\)/g)) {
      const [, option, said] = m;
      const camel = option!.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const field = camel in defaults ? camel : `${camel}Ms`;
      const names = codeSpans(said!);
      const number = /\d[\d,]*/.exec(said!)?.[0];
      let expected: unknown;
      if (names.length > 0) expected = KEYS.includes(names[0]!) ? contextDefault(names[0]!) : envDefault(names[0]!);
      else if (number !== undefined) expected = toNumber(number);
      else continue;
      expect(field in defaults, `${command} has a default for --${option}`).toBe(true);
      expect((defaults as Record<string, unknown>)[field], `docs/development.md: ${command} --${option} (${said})`).toBe(expected);
      checked += 1;
    }
    expect(checked).toBeGreaterThan(2);
  });

  it('npm start and npm run enqueue', () => {
    const [items] = figure('docs/development.md', /`--items` from \d+ to \d+, (\d+) by default/);
    expect(Number(items)).toBe(DEFAULT_ITEM_COUNT);
    const [attempts] = figure('docs/item-sync.md', /up to (\d+) attempts with backoff \(`--max-attempts`\)/);
    expect(Number(attempts)).toBe(DEFAULT_MAX_ATTEMPTS);
  });

  it("npm run sim: each scenario's sizes", () => {
    const rows = commands();
    const row = (name: string): string => {
      const cell = rows.get(`npm run sim -- ${name}`);
      if (cell === undefined) throw new Error(`docs/development.md has no row for npm run sim -- ${name}`);
      return flat(cell);
    };
    const nums = (text: string, pattern: RegExp): number[] => {
      const m = pattern.exec(text);
      if (!m) throw new Error(`no ${pattern} in "${text}"`);
      return m.slice(1).map(toNumber);
    };
    expect(nums(row('fairness'), /(\d+) quiet accounts beside one account's backfill of ([\d,]+) ids/)).toEqual([FAIRNESS_FULL.quietAccounts, FAIRNESS_FULL.backfillIds]);
    expect(nums(row('backlog'), /(\d+) quiet accounts \(an id every (\d+) s each\) beside one account's backlog of ([\d,]+) ids, .* at L = (\d+)\/s and (\d+)\/s/)).toEqual([
      BACKLOG_FULL.quietAccounts,
      BACKLOG_FULL.sendEverySeconds,
      BACKLOG_FULL.backfillIds,
      ...BACKLOG_FULL.limits,
    ]);
    expect(nums(row('backlog'), /`--short` \((\d+) quiet accounts, ([\d,]+) ids at L = (\d+)\/s/)).toEqual([BACKLOG_SHORT.quietAccounts, BACKLOG_SHORT.backfillIds, ...BACKLOG_SHORT.limits]);
    expect(nums(row('scope'), /(\d+) accounts whose limits differ/)).toEqual([LIMITS_FULL.accounts]);
    expect(nums(row('scope'), /outage over (\d+) connections/)).toEqual([OUTAGE_FULL.connections]);
    expect(nums(row('reconcile'), /pass of ([\d,]+) ids/)).toEqual([RECONCILE_FULL.ids]);
    expect(nums(row('push'), /L = (\d+)\/s told; ([\d,]+) ids by default/)).toEqual([PUSH_FULL.limit, PUSH_FULL.ids]);
    expect(nums(row('push'), /`--short` \(([\d,]+) ids/)).toEqual([PUSH_SHORT.ids]);
    const connections = CONNECTIONS_FULL;
    expect(nums(row('connections'), /([\d,]+) connections × (\d+) ids at L = (\d+)\/s, one revoked at the provider, (\w+) simulated days/)).toEqual([
      connections.connections,
      connections.idsEach,
      connections.limit,
      connections.days,
    ]);
    expect(nums(row('connections'), /`--short` \((\d+) × (\d+)/)).toEqual([CONNECTIONS_SHORT.connections, CONNECTIONS_SHORT.idsEach]);
    expect(nums(row('accounts'), /([\d,]+) connections × (\d+) ids at L = (\d+)\/s/)).toEqual([ACCOUNTS_FULL.connections, ACCOUNTS_FULL.idsEach, ACCOUNTS_FULL.limit]);
    expect(nums(row('accounts'), /`--short` \((\d+) × (\d+)/)).toEqual([ACCOUNTS_SHORT.connections, ACCOUNTS_SHORT.idsEach]);
    expect(nums(row('discovery'), /([\d,]+) items (\d+) deep mirrored .* beside (\d+) quiet accounts, L = (\d+)\/s/)).toEqual([
      DISCOVERY_FULL.items,
      DISCOVERY_FULL.depth,
      DISCOVERY_FULL.quietAccounts,
      DISCOVERY_FULL.limit,
    ]);
    expect(nums(row('discovery'), /`--short` \(([\d,]+) items (\d+) deep, (\d+) quiet accounts/)).toEqual([DISCOVERY_SHORT.items, DISCOVERY_SHORT.depth, DISCOVERY_SHORT.quietAccounts]);
    expect(nums(row('refresher'), /([\d,]+) connections in use for (\d+) hours/)).toEqual([REFRESHER_FULL.connections, REFRESHER_FULL.hours]);
    expect(nums(row('refresher'), /`--short` \((\d+) connections for (an|\d+) hours?/)).toEqual([REFRESHER_SHORT.connections, REFRESHER_SHORT.hours]);
    expect(nums(row('changes'), /([\d,]+) connections × (\d+) items × (\d+) rounds \(([\d,]+) changes\), and beside them one busy connection of ([\d,]+) items × (\d+) rounds \(([\d,]+) changes/)).toEqual([
      CHANGES_FULL.connections,
      CHANGES_FULL.itemsEach,
      CHANGES_FULL.rounds,
      CHANGES_FULL.connections * CHANGES_FULL.itemsEach * CHANGES_FULL.rounds,
      CHANGES_FULL.busyItems,
      CHANGES_FULL.rounds,
      CHANGES_FULL.busyItems * CHANGES_FULL.rounds,
    ]);
    expect(nums(row('changes'), /`--short` \((\d+) × (\d+) × (\d+) and a busy one of (\d+) items/)).toEqual([CHANGES_SHORT.connections, CHANGES_SHORT.itemsEach, CHANGES_SHORT.rounds, CHANGES_SHORT.busyItems]);
  });
});

describe("AWS's latency, as docs/development.md states the model", () => {
  it('gives each operation the figure dev/fakes/dynamo-latency.ts has, every operation once, and the default of any other; the simulations take it unscaled by default', () => {
    const latency = tableWithHeader(section(page('docs/development.md'), "AWS's latency"), ['operation', 'ms', 'why']);
    const stated = new Map<string, number>();
    for (const row of latency.rows) {
      const ms = toNumber(row[1]!);
      for (const operation of codeSpans(row[0]!)) {
        expect(stated.has(operation), `docs/development.md states ${operation}'s latency once`).toBe(false);
        stated.set(operation, ms);
      }
      if (/any other operation/.test(row[0]!)) stated.set('any other operation', ms);
    }
    expect(Object.fromEntries(stated)).toEqual({ ...DYNAMO_LATENCY_MS, 'any other operation': OTHER_OPERATION_MS });
    expect(simDynamoLatency().factor).toBe(1);
  });
});

// ---- links, anchors, prerequisites ------------------------------------------------------------------------

describe('links and anchors of README.md and docs/*.md', () => {
  it.each(DOC_PAGES)('%s', (path) => {
    const broken: string[] = [];
    for (const { target, line } of links(page(path))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file === '' ? path : normalize(join(dirname(path), decodeURIComponent(file)));
      if (!existsSync(join(ROOT, resolved))) {
        broken.push(`${path}:${line}: ${target} (no file ${resolved})`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!resolved.endsWith('.md') || !anchors(page(resolved)).has(anchor)) broken.push(`${path}:${line}: ${target} (no heading of ${resolved} has the anchor #${anchor})`);
    }
    expect(broken).toEqual([]);
  });

  it('names only files that exist (paths from the repository root: dev/…, functions/…, infra/…, tools/…, test/…)', () => {
    const named = everywhere(/(?<![\w/.-])((?:dev|functions|infra|tools|test)\/[\w./-]+\.(?:ts|mts|json|md))\b/g);
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter(({ values }) => !existsSync(join(ROOT, values[0]!))).map(({ path, values }) => `${path}: ${values[0]}`)).toEqual([]);
  });

  it('finds the links it checks', () => {
    expect(DOC_PAGES.flatMap((path) => links(page(path))).length).toBeGreaterThan(100);
  });

  it("README.md's documentation table lists every page of docs/, and what a client application builds with", () => {
    const listed = tableWithHeader(section(page('README.md'), 'Documentation'), ['page', 'what it holds']).rows.map((row) => /\]\(([^)]+)\)/.exec(row[0]!)?.[1]);
    const pages = listed.filter((link) => link !== undefined && /^docs\/[^#]+\.md$/.test(link));
    expect([...pages].sort()).toEqual(DOC_PAGES.filter((path) => path.startsWith('docs/')));
    expect(listed.filter((link) => !pages.includes(link))).toEqual(['docs/openapi.json', 'clients/typescript/README.md', 'docs/development.md#a-local-api-to-build-against']);
  });

  it('computes anchors as GitHub does', () => {
    const headings = ['# Fairness', '## The operator CLI: `npm run connections`', '## The background lane: `--backfill`', '## A pass of 1,000,000 ids (virtual time)', '## Where to add…', '### Logs', '### Logs', '## `RECONCILE_SEGMENTS`'];
    expect([...anchors(headings.join('\n'))]).toEqual([
      'fairness',
      'the-operator-cli-npm-run-connections',
      'the-background-lane---backfill',
      'a-pass-of-1000000-ids-virtual-time',
      'where-to-add',
      'logs',
      'logs-1',
      'reconcile_segments',
    ]);
  });
});

describe('the README, the front door', () => {
  it('is at most 300 lines, in the order a newcomer asks, and links the glossary, the changelog and upgrading', () => {
    const text = page('README.md');
    expect(text.trimEnd().split('\n').length).toBeLessThanOrEqual(300);
    const order = ['What the provider must offer', 'How it works', 'Two commands', 'Deploy to AWS', 'Feed it', 'Settings for a first deployment', 'What it costs', 'When you are paged', 'Documentation'];
    const at = order.map((heading) => text.indexOf(`\n## ${heading}\n`));
    expect(at.every((index) => index > 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    for (const link of ['(docs/glossary.md)', '(CHANGELOG.md)', '(docs/upgrading.md)']) expect(text).toContain(link);
  });
});

describe("the README's prerequisites", () => {
  it('name Java 17 and the command that installs it before the two commands, as the commands say it when Java is missing', () => {
    const twoCommands = flat(section(page('README.md'), 'Two commands'));
    expect(twoCommands).toContain(`Java ${JAVA_MIN_MAJOR} or later`);
    const install = /apt-get install -y [\w.-]+/.exec(JAVA_REQUIRED)![0];
    expect(twoCommands).toContain(`\`${install}\``);
  });

  it('name the AWS CLI v2 and jq where the docs use them', () => {
    const prerequisites = flat(page('README.md')).split('**Prerequisites.**')[1]!.split('2. **')[0]!;
    const used = (pattern: RegExp) => DOC_PAGES.some((path) => pattern.test(page(path)));
    expect(used(/aws logs tail/)).toBe(true);
    expect(prerequisites).toContain('AWS CLI v2');
    expect(used(/\| jq /)).toBe(true);
    expect(prerequisites).toContain('`jq`');
  });
});
