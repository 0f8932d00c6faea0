import 'aws-sdk-client-mock-vitest/extend';
import { afterAll } from 'vitest';
import { removeSynthDir } from './support/shared-modules.js';

// Runs after every test file, shared modules or not (test/support/shared-modules.ts).
afterAll(removeSynthDir);
