/**
 * The rules every run-time variable is read by (./config.ts and ./client-config.ts re-export and use
 * them): a required value, a whole number in a range (with a default, optional or required), an SQS
 * queue URL, a KMS key ARN. Every problem throws a ConfigError naming the variable.
 */
import { ConfigError } from './errors.js';

export type Env = Readonly<Record<string, string | undefined>>;

export function required(env: Env, key: string): string {
  const value = env[key];
  if (value === undefined || value.trim() === '') {
    throw new ConfigError(key, 'is required but not set');
  }
  return value.trim();
}

export function integer(env: Env, key: string, fallback: number, min: number, max: number): number {
  const raw = env[key];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) {
    throw new ConfigError(key, `must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  const value = Number(raw.trim());
  if (value < min || value > max) {
    throw new ConfigError(key, `must be a whole number from ${min} to ${max}, got ${value}`);
  }
  return value;
}

/** An optional whole number; undefined when unset. */
export function optionalInteger(env: Env, key: string, min: number, max: number): number | undefined {
  const raw = env[key];
  if (raw === undefined || raw.trim() === '') return undefined;
  return integer(env, key, min, min, max);
}

/** A whole number that must be set (no default hides it: the stack sets it). */
export function requiredInteger(env: Env, key: string, min: number, max: number): number {
  required(env, key);
  return integer(env, key, min, min, max);
}

export function queueUrl(env: Env, key: string): string {
  const raw = required(env, key);
  try {
    const url = new URL(raw);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('not http(s)');
  } catch {
    throw new ConfigError(key, `must be an SQS queue URL, got "${raw}"`);
  }
  return raw;
}

/** A KMS key's ARN (or an alias's): `arn:<partition>:kms:<region>:<account>:key/…` or `…:alias/…`. */
export const KMS_KEY_ARN_PATTERN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)\/[A-Za-z0-9/_-]+$/;

export function kmsKeyArn(env: Env, key: string): string {
  const value = required(env, key);
  if (!KMS_KEY_ARN_PATTERN.test(value)) throw new ConfigError(key, `must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), got "${value}"`);
  return value;
}
