/**
 * The item sync's lazily loaded modules (functions/item-sync/lazy-modules.ts) are bundled on their
 * own, each with its own copy of functions/shared/errors.ts: an error one of them throws is an
 * instance of another copy's class. `instanceof` and the record's outcome must not depend on which
 * copy made it. Here a second copy of the module is loaded (a fresh module registry) to stand for
 * the lazy module's.
 */
import { describe, expect, it, vi } from 'vitest';
import { outcomeOf } from '../../../functions/item-sync/outcome/decide.js';
import { SealError } from '../../../functions/shared/connections/sealing.js';
import { ConfigError, PermanentError, TransientError } from '../../../functions/shared/errors.js';

async function otherCopies() {
  vi.resetModules();
  const errors = await import('../../../functions/shared/errors.js');
  const sealing = await import('../../../functions/shared/connections/sealing.js');
  return { ...errors, SealError: sealing.SealError };
}

const POLICY = { rateLimitMinDelaySeconds: 30 };

describe('the shared errors across copies of their module', () => {
  it('a second copy is another class (what a separately bundled module throws)', async () => {
    const copy = await otherCopies();
    expect(copy.PermanentError).not.toBe(PermanentError);
  });

  it('instanceof holds across copies for each kind, and only for its own kind', async () => {
    const copy = await otherCopies();
    const made = {
      config: new copy.ConfigError('ITEMS_BUCKET_NAME', 'the bucket does not exist'),
      permanent: new copy.PermanentError('refused as invalid'),
      transient: new copy.TransientError('throttled'),
      seal: new copy.SealError('sealed for another connection'),
    };
    expect(made.config).toBeInstanceOf(ConfigError);
    expect(made.permanent).toBeInstanceOf(PermanentError);
    expect(made.transient).toBeInstanceOf(TransientError);
    expect(made.seal).toBeInstanceOf(SealError);
    // A SealError is a PermanentError; a PermanentError is no SealError.
    expect(made.seal).toBeInstanceOf(PermanentError);
    expect(made.permanent).not.toBeInstanceOf(SealError);
    expect(made.permanent).not.toBeInstanceOf(TransientError);
    expect(made.transient).not.toBeInstanceOf(PermanentError);
    expect(made.config).not.toBeInstanceOf(PermanentError);
    for (const error of Object.values(made)) expect(error).toBeInstanceOf(Error);
    expect(new Error('plain')).not.toBeInstanceOf(PermanentError);
    expect({ message: 'not an error' }).not.toBeInstanceOf(TransientError);
  });

  it("the record's outcome is decided the same whichever copy made its error", async () => {
    const copy = await otherCopies();
    expect(outcomeOf(new copy.PermanentError('refused as invalid'), POLICY)).toEqual({ kind: 'dead', reason: 'refused as invalid' });
    expect(outcomeOf(new copy.TransientError('throttled'), POLICY)).toEqual({ kind: 'retry', reason: 'throttled' });
    expect(outcomeOf(new PermanentError('refused as invalid'), POLICY)).toEqual({ kind: 'dead', reason: 'refused as invalid' });
  });
});
