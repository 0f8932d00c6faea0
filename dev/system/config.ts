/**
 * The configuration the local system is built from: the context of cdk.json (what `cdk deploy`
 * reads) with a scenario's overrides on top (the simulator's address as baseUrl, a known provider
 * limit, another freshnessHours...), validated by the stacks' own reader (infra/context.ts). What a
 * scenario does not override is the deployed default.
 */
import { readFileSync } from 'node:fs';
import { CONTEXT_KEYS, readContentSyncConfig, type ContentSyncConfig } from '../../infra/context.js';

export type ContextKey = keyof typeof CONTEXT_KEYS;

/** A scenario's context values, as `-c key=value` would give them. */
export type ContextOverrides = Partial<Record<ContextKey, string | number>>;

/** The `context` of cdk.json, read once. */
let cdkContext: Record<string, unknown> | undefined;

function deployedContext(): Record<string, unknown> {
  cdkContext ??= (JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')) as { context?: Record<string, unknown> }).context ?? {};
  return cdkContext;
}

/**
 * The validated configuration of a deployment made with cdk.json and `overrides`. A placeholder
 * base URL stands in when a scenario names none (its provider is reached in process).
 */
export function systemConfig(overrides: ContextOverrides = {}): ContentSyncConfig {
  const context = { baseUrl: PLACEHOLDER_BASE_URL, ...deployedContext(), ...overrides } as Record<string, unknown>;
  return readContentSyncConfig({ tryGetContext: (key) => context[key] });
}

/** The provider's address when a scenario reaches it in process (the path is the simulator's). */
export const PLACEHOLDER_BASE_URL = 'http://127.0.0.1:1/api/v2';
