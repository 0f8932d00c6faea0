/**
 * Tokens sealed as a deployment seals them, for tests: the application's TokenSealer over its KMS
 * adapter (KmsDataKeys) and a real KMSClient answered in process by the harness's KMS model
 * (dev/fakes/kms-model.ts). `calls` counts the KMS requests by operation.
 */
import { KMSClient } from '@aws-sdk/client-kms';
import { KmsDataKeys } from '../../functions/shared/adapters/kms-data-keys.js';
import { TokenSealer } from '../../functions/shared/connections/sealing.js';
import { attachKms, type CallCounts } from '../../dev/fakes/in-process-aws.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../dev/fakes/local-aws.js';
import { KmsModel } from '../../dev/fakes/kms-model.js';
import { kmsApi } from '../../functions/shared/adapters/kms-api.js';

export interface TestSealing {
  sealer: TokenSealer;
  kms: KMSClient;
  model: KmsModel;
  keyArn: string;
  calls: CallCounts;
}

export function testSealing(): TestSealing {
  const model = new KmsModel();
  const keyArn = model.createKey();
  const calls: CallCounts = {};
  const kms = attachKms(new KMSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), model, calls);
  return { sealer: new TokenSealer(new KmsDataKeys(kmsApi(kms), keyArn)), kms, model, keyArn, calls };
}
