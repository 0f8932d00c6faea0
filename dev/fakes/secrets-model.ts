/**
 * Secrets Manager as the harness models it, in memory: secrets with versions and the AWSCURRENT /
 * AWSPREVIOUS stages, behind the HTTP emulator and the in-process clients alike, and the JSON
 * protocol operations they answer through `handleSecrets` (awsJson1_1, `X-Amz-Target:
 * secretsmanager.<Operation>`): CreateSecret, GetSecretValue, PutSecretValue, DescribeSecret,
 * DeleteSecret (immediate).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { systemClock, type Clock } from './clock.js';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './local-aws.js';
import { ServiceError } from './service-error.js';

interface SecretVersion {
  versionId: string;
  secretString?: string;
  secretBinary?: string;
  stages: string[];
  createdAt: number;
}

interface SecretState {
  name: string;
  arn: string;
  description?: string;
  createdAt: number;
  versions: SecretVersion[];
}

/** Which GetSecretValue calls to refuse, with the error to answer. */
export type GetSecretFaultRule = (secretId: string) => ServiceError | undefined;

export interface SecretStoreOptions {
  region?: string;
  clock?: Clock;
}

export class SecretStore {
  readonly region: string;
  /** Every string value stored, in order (searched for tokens). */
  readonly history: Array<{ name: string; value: string }> = [];
  /** Refusals to inject into GetSecretValue calls made through the API. */
  getFault: GetSecretFaultRule | undefined;

  private readonly secrets = new Map<string, SecretState>();
  private readonly clock: Clock;

  constructor(options: SecretStoreOptions = {}) {
    this.region = options.region ?? LOCAL_REGION;
    this.clock = options.clock ?? systemClock;
  }

  /** Creates a secret (with a value, or none yet, as CreateSecret allows); returns its ARN. */
  create(name: string, secretString?: string, description?: string): string {
    if (this.secrets.has(name)) {
      throw new ServiceError('ResourceExistsException', `The operation failed because the secret ${name} already exists.`);
    }
    const secret: SecretState = {
      name,
      arn: `arn:aws:secretsmanager:${this.region}:${LOCAL_ACCOUNT_ID}:secret:${name}-${randomBytes(3).toString('hex')}`,
      createdAt: this.clock.now(),
      versions: [],
      ...(description !== undefined ? { description } : {}),
    };
    this.secrets.set(name, secret);
    if (secretString !== undefined) this.putValue(name, { secretString });
    return secret.arn;
  }

  /** Stores a value in a secret, creating the secret if need be. */
  set(name: string, secretString: string): void {
    if (this.secrets.has(name)) this.putValue(name, { secretString });
    else this.create(name, secretString);
  }

  /** The current string value, or undefined. */
  current(secretId: string): string | undefined {
    return this.find(secretId).versions.find((v) => v.stages.includes('AWSCURRENT'))?.secretString;
  }

  /** A secret by name or ARN; throws ResourceNotFoundException. */
  find(secretId: string): SecretState {
    const secret = this.secrets.get(secretId) ?? [...this.secrets.values()].find((s) => s.arn === secretId);
    if (!secret) throw new ServiceError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
    return secret;
  }

  delete(secretId: string): SecretState {
    const secret = this.find(secretId);
    this.secrets.delete(secret.name);
    return secret;
  }

  /** A new AWSCURRENT version (the current one becomes AWSPREVIOUS); a repeated ClientRequestToken is idempotent. */
  putValue(secretId: string, value: { secretString?: string; secretBinary?: string; versionId?: string }): SecretVersion {
    const secret = this.find(secretId);
    const versionId = value.versionId ?? randomUUID();
    const existing = secret.versions.find((v) => v.versionId === versionId);
    if (existing) {
      if (existing.secretString !== value.secretString) {
        throw new ServiceError('ResourceExistsException', "You can't modify an existing version, you can only create new versions.");
      }
      return existing;
    }
    for (const v of secret.versions) {
      if (v.stages.includes('AWSPREVIOUS')) v.stages = v.stages.filter((s) => s !== 'AWSPREVIOUS');
      if (v.stages.includes('AWSCURRENT')) v.stages = [...v.stages.filter((s) => s !== 'AWSCURRENT'), 'AWSPREVIOUS'];
    }
    secret.versions = secret.versions.filter((v) => v.stages.length > 0);
    const version: SecretVersion = {
      versionId,
      stages: ['AWSCURRENT'],
      createdAt: this.clock.now(),
      ...(value.secretString !== undefined ? { secretString: value.secretString } : {}),
      ...(value.secretBinary !== undefined ? { secretBinary: value.secretBinary } : {}),
    };
    secret.versions.push(version);
    if (value.secretString !== undefined) this.history.push({ name: secret.name, value: value.secretString });
    return version;
  }

  now(): number {
    return this.clock.now();
  }
}

// ---- the JSON protocol ----

export function handleSecrets(store: SecretStore, operation: string, input: Record<string, unknown>): unknown {
  switch (operation) {
    case 'CreateSecret':
      return createSecret(store, input);
    case 'GetSecretValue':
      return getSecretValue(store, input);
    case 'PutSecretValue': {
      const secretId = requireString(input, 'SecretId');
      const secret = store.find(secretId);
      if (input.SecretString === undefined && input.SecretBinary === undefined) {
        throw new ServiceError('InvalidParameterException', 'You must provide either SecretString or SecretBinary.');
      }
      const version = store.putValue(secretId, valueOf(input));
      return { ARN: secret.arn, Name: secret.name, VersionId: version.versionId, VersionStages: [...version.stages] };
    }
    case 'DescribeSecret': {
      const secret = store.find(requireString(input, 'SecretId'));
      const versions: Record<string, string[]> = {};
      for (const v of secret.versions) if (v.stages.length) versions[v.versionId] = [...v.stages];
      return {
        ARN: secret.arn,
        Name: secret.name,
        CreatedDate: secret.createdAt / 1000,
        VersionIdsToStages: versions,
        ...(secret.description !== undefined ? { Description: secret.description } : {}),
      };
    }
    case 'DeleteSecret': {
      const secret = store.delete(requireString(input, 'SecretId'));
      return { ARN: secret.arn, Name: secret.name, DeletionDate: store.now() / 1000 };
    }
    default:
      throw new ServiceError('InvalidRequestException', `The emulator does not support secretsmanager.${operation}.`);
  }
}

function createSecret(store: SecretStore, input: Record<string, unknown>): unknown {
  const name = requireString(input, 'Name');
  const arn = store.create(name, undefined, typeof input.Description === 'string' ? input.Description : undefined);
  const hasValue = input.SecretString !== undefined || input.SecretBinary !== undefined;
  const version = hasValue ? store.putValue(name, valueOf(input)) : undefined;
  return { ARN: arn, Name: name, ...(version ? { VersionId: version.versionId } : {}) };
}

function getSecretValue(store: SecretStore, input: Record<string, unknown>): unknown {
  const secretId = requireString(input, 'SecretId');
  const secret = store.find(secretId);
  const fault = store.getFault?.(secretId);
  if (fault) throw fault;
  const stage = typeof input.VersionStage === 'string' ? input.VersionStage : 'AWSCURRENT';
  const version =
    typeof input.VersionId === 'string' ? secret.versions.find((v) => v.versionId === input.VersionId) : secret.versions.find((v) => v.stages.includes(stage));
  if (!version) {
    throw new ServiceError('ResourceNotFoundException', `Secrets Manager can't find the specified secret value for staging label: ${stage}`);
  }
  return {
    ARN: secret.arn,
    Name: secret.name,
    VersionId: version.versionId,
    VersionStages: [...version.stages],
    CreatedDate: version.createdAt / 1000,
    ...(version.secretString !== undefined ? { SecretString: version.secretString } : {}),
    ...(version.secretBinary !== undefined ? { SecretBinary: version.secretBinary } : {}),
  };
}

function valueOf(input: Record<string, unknown>): { secretString?: string; secretBinary?: string; versionId?: string } {
  if (input.SecretString !== undefined && typeof input.SecretString !== 'string') {
    throw new ServiceError('InvalidParameterException', 'SecretString must be a string.');
  }
  return {
    ...(typeof input.SecretString === 'string' ? { secretString: input.SecretString } : {}),
    ...(typeof input.SecretBinary === 'string' ? { secretBinary: input.SecretBinary } : {}),
    ...(typeof input.ClientRequestToken === 'string' ? { versionId: input.ClientRequestToken } : {}),
  };
}

function requireString(input: Record<string, unknown>, key: string): string {
  const value = input[key];
  if (typeof value !== 'string' || value === '') {
    throw new ServiceError('InvalidParameterException', `You must specify ${key}.`);
  }
  return value;
}
