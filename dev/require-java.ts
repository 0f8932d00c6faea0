/**
 * `npm test` runs this first: without Java 17 (which DynamoDB Local needs), the run stops at once
 * with the one line that names it, before the type check and the tests.
 */
import { exitUnlessJava } from './fakes/dynamodb-local.js';

exitUnlessJava('test');
