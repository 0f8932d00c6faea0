/**
 * The change-events function's run-time configuration: read and validated once, when the module
 * loads; a problem throws a ConfigError naming the environment variable.
 */
import { required, type Env } from '../shared/config.js';

export const CHANGE_EVENTS_ENV = {
  /** The bus the events go to: its name or ARN (the stack sets the ARN). */
  eventBusName: 'EVENT_BUS_NAME',
} as const;

export interface ChangeEventsConfig {
  eventBusName: string;
}

export function loadChangeEventsConfig(env: Env = process.env): ChangeEventsConfig {
  return { eventBusName: required(env, CHANGE_EVENTS_ENV.eventBusName) };
}
