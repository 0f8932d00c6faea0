/**
 * SQS on 127.0.0.1 (ephemeral port), for the local run and the tests: one HTTP server that speaks
 * the JSON protocol the SDK v3 client uses, over the harness's model of the service (sqs-model.ts;
 * the in-process clients of the bench, the soak and the simulations use the same model without
 * HTTP, in-process-aws.ts). No npm package emulates it for SDK v3.
 *
 * KMS beside it on the same port (awsJson1_1, `X-Amz-Target: TrentService.<Operation>`, blobs as
 * base64 in the JSON), over the KMS model (kms-model.ts): a KMSClient, or the CLI run with
 * AWS_ENDPOINT_URL_KMS, pointed at the emulator reaches it. It holds no key until one is created.
 *
 * Requests are not authenticated (signatures are ignored). Errors use the `__type` form the SDK
 * parses (plus SQS's `x-amzn-query-error` header). Imports node built-ins and the models only.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Clock } from './clock.js';
import { handleKms } from './kms-api.js';
import { KmsModel } from './kms-model.js';
import { listenOnLoopback } from './loopback.js';
import { isObject, ServiceError } from './service-error.js';
import { handleSqs } from './sqs-api.js';
import { SqsModel } from './sqs-model.js';

const MAX_REQUEST_BYTES = 8 * 1024 * 1024;

export interface EmulatorOptions {
  /** Region used in ARNs; default AWS_REGION or us-east-1. */
  region?: string;
  /** The SQS model's time (its long polls, delays and visibility); default the wall clock. */
  clock?: Clock;
}

export interface RecordedAwsRequest {
  service: 'sqs' | 'kms' | 'unknown';
  operation: string;
  status: number;
}

export class AwsEmulator {
  readonly endpoint: string;
  readonly region: string;
  readonly sqs: SqsModel;
  readonly kms: KmsModel;
  /** Operation names and statuses, in arrival order (no payloads). */
  readonly requests: RecordedAwsRequest[] = [];

  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: Server,
    port: number,
    region: string,
    clock: Clock | undefined,
  ) {
    this.endpoint = `http://127.0.0.1:${port}`;
    this.region = region;
    this.sqs = new SqsModel({ region, origin: () => this.endpoint, ...(clock ? { clock } : {}) });
    this.kms = new KmsModel({ region });
  }

  static async start(options: EmulatorOptions = {}): Promise<AwsEmulator> {
    const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
    const server = createServer();
    server.keepAliveTimeout = 30_000;
    const emulator = new AwsEmulator(server, await listenOnLoopback(server), region, options.clock);
    server.on('request', (req, res) => void emulator.onRequest(req, res));
    return emulator;
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.sqs.close();
      this.server.close(() => resolve());
      // Every connection, long polls included (not only idle ones).
      this.server.closeAllConnections();
    });
    return this.closing;
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.on('error', () => undefined);
    const target = String(req.headers['x-amz-target'] ?? '');
    const dot = target.indexOf('.');
    const prefix = dot < 0 ? '' : target.slice(0, dot);
    const operation = dot < 0 ? '' : target.slice(dot + 1);
    const service = prefix === 'AmazonSQS' ? 'sqs' : prefix === 'TrentService' ? 'kms' : 'unknown';
    const contentType = service === 'sqs' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1';
    const record: RecordedAwsRequest = { service, operation, status: 0 };
    this.requests.push(record);
    try {
      if (req.method !== 'POST') throw new ServiceError('UnsupportedOperation', `The emulator only accepts POST, got ${req.method}.`, 405);
      const text = await readBody(req);
      let input: unknown = {};
      if (text.trim() !== '') {
        try {
          input = JSON.parse(text);
        } catch {
          throw new ServiceError('SerializationException', 'The request body is not JSON.');
        }
      }
      if (!isObject(input)) throw new ServiceError('SerializationException', 'The request body is not a JSON object.');
      let output: unknown;
      if (service === 'sqs') output = await handleSqs(this.sqs, operation, input);
      else if (service === 'kms') output = handleKms(this.kms, operation, input, 'base64');
      else throw new ServiceError('UnknownOperationException', `Unknown X-Amz-Target "${target}".`);
      this.reply(res, record, 200, contentType, output);
    } catch (error) {
      if (error instanceof ServiceError) {
        const namespace = service === 'sqs' ? 'com.amazonaws.sqs#' : '';
        const headers: Record<string, string> = { 'x-amzn-ErrorType': error.type };
        if (service === 'sqs' && error.queryCode) headers['x-amzn-query-error'] = `${error.queryCode};Sender`;
        this.reply(res, record, error.status, contentType, { __type: `${namespace}${error.type}`, message: error.message }, headers);
      } else {
        this.reply(res, record, 500, contentType, { __type: 'InternalFailure', message: `emulator error: ${String(error)}` });
      }
    }
  }

  private reply(
    res: ServerResponse,
    record: RecordedAwsRequest,
    status: number,
    contentType: string,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    if (res.headersSent || res.destroyed) return;
    const buffer = Buffer.from(JSON.stringify(body ?? {}), 'utf8');
    record.status = status;
    res.writeHead(status, {
      'Content-Type': contentType,
      'Content-Length': buffer.length,
      'x-amzn-RequestId': randomUUID(),
      ...headers,
    });
    res.end(buffer);
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) {
        reject(new ServiceError('RequestEntityTooLarge', 'The request is too large.', 413));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
