/**
 * The stateful half of the token refresher: the credentials secret (`{"clientId", "refreshToken"}`,
 * set by the operator; every refresh token the provider rotates is written back by the refresher)
 * and the access-token secret (`{"accessToken", "refreshedAt"}`, written by the refresher, read by
 * the item sync). Retained when the stack is deleted; no hard-coded physical name.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, RemovalPolicy, SecretValue, Validations, type Stack } from 'aws-cdk-lib';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { CREDENTIALS_PLACEHOLDER } from '../../functions/shared/secrets.js';

/** What the deploy writes into the credentials secret; the operator replaces it (README, "Deploy to AWS", step 4: "Store the provider credentials"). */
export const CREDENTIALS_PLACEHOLDER_VALUE = JSON.stringify({
  clientId: CREDENTIALS_PLACEHOLDER,
  refreshToken: CREDENTIALS_PLACEHOLDER,
});
/** The access-token secret until the refresher first writes it: the sync function reports "has the token refresher run?". */
export const ACCESS_TOKEN_INITIAL_VALUE = JSON.stringify({ accessToken: '', refreshedAt: '' });

/** Both secrets as the functions' stack uses them. */
export interface TokenSecretsResources {
  readonly credentialsSecret: secretsmanager.ISecret;
  readonly accessTokenSecret: secretsmanager.ISecret;
}

export interface TokenSecrets extends TokenSecretsResources {
  readonly credentialsSecret: secretsmanager.Secret;
  readonly accessTokenSecret: secretsmanager.Secret;
}

/** Both secrets, their one cdk-nag finding acknowledged, and their outputs. */
export function addTokenSecrets(stack: Stack): TokenSecrets {
  // CloudFormation writes SecretString only when the secret is created or this template value
  // changes: the operator's value (and every refresh token the provider rotates in) survives
  // later deploys. Never change these initial values.
  const credentialsSecret = new secretsmanager.Secret(stack, 'CredentialsSecret', {
    description: 'content-sync provider credentials {"clientId","refreshToken"}: set by the operator, rotated refresh tokens written by the token refresher',
    secretStringValue: SecretValue.unsafePlainText(CREDENTIALS_PLACEHOLDER_VALUE),
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const accessTokenSecret = new secretsmanager.Secret(stack, 'AccessTokenSecret', {
    description: 'content-sync provider access token {"accessToken","refreshedAt"}: written by the token refresher',
    secretStringValue: SecretValue.unsafePlainText(ACCESS_TOKEN_INITIAL_VALUE),
    removalPolicy: RemovalPolicy.RETAIN,
  });
  for (const secret of [credentialsSecret, accessTokenSecret]) {
    Validations.of(secret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The provider issues these tokens; Secrets Manager rotation cannot mint them. The token refresher replaces the access token every tokenRefreshMinutes and stores every refresh token the provider rotates.',
    });
  }

  new CfnOutput(stack, 'CredentialsSecretName', {
    description: 'Secret to fill with {"clientId": "...", "refreshToken": "..."} (aws secretsmanager put-secret-value)',
    value: credentialsSecret.secretName,
  });
  new CfnOutput(stack, 'AccessTokenSecretName', {
    description: 'Secret holding the current access token (written by the token refresher)',
    value: accessTokenSecret.secretName,
  });
  return { credentialsSecret, accessTokenSecret };
}
