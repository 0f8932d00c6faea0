/**
 * The guard of a webhook endpoint's URL (functions/shared/webhooks/url-guard.ts): the syntax check
 * (https only, no user name or password, no fragment, length) never quoting the URL's secrets, each
 * non-public IPv4/IPv6 range refused with its reason, public addresses allowed, and the whole check
 * of an endpoint with an injected resolver (no network): IP literal hosts, localhost, DNS rebinding
 * (one bad address among good ones), resolver failures and the loopback allowance.
 */
import { describe, expect, it } from 'vitest';
import { addressProblem, checkEndpoint, urlProblem, type Resolver } from '../../../../functions/shared/webhooks/url-guard.js';

/** A resolver answering from a table, rejecting any name missing from it. */
function resolverOf(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (host: string): Promise<string[]> => {
    asked.push(host);
    const answer = table[host];
    if (answer === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return answer;
  };
  return Object.assign(resolve, { asked });
}

const PUBLIC = resolverOf({ 'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'] });

describe('urlProblem', () => {
  it('accepts an https URL with any port, path and query', () => {
    expect(urlProblem('https://hooks.example.com/in')).toBeUndefined();
    expect(urlProblem('https://hooks.example.com:8443/in?token=abc')).toBeUndefined();
    expect(urlProblem('https://[2606:4700:4700::1111]/in')).toBeUndefined();
  });

  it('refuses anything but https', () => {
    expect(urlProblem('http://hooks.example.com/in')).toBe('the URL must be https');
    expect(urlProblem('ftp://hooks.example.com/in')).toBe('the URL must be https');
    expect(urlProblem('file:///etc/passwd')).toBe('the URL must be https');
  });

  it('refuses what is not an absolute URL, without quoting it', () => {
    expect(urlProblem('/relative?secret=s3cr3t')).toBe('the URL is not an absolute URL');
    expect(urlProblem('https://')).toBe('the URL is not an absolute URL');
  });

  it('refuses a user name or password, naming the part and not quoting it', () => {
    for (const url of ['https://alice:s3cr3t@hooks.example.com/in', 'https://alice@hooks.example.com/in', 'https://:s3cr3t@hooks.example.com/']) {
      const problem = urlProblem(url);
      expect(problem).toBe('the URL must not carry a user name or password');
      expect(problem).not.toMatch(/alice|s3cr3t/);
    }
  });

  it('refuses a fragment, even an empty one, without quoting the query', () => {
    for (const url of ['https://hooks.example.com/in?key=s3cr3t#part', 'https://hooks.example.com/in?key=s3cr3t#']) {
      const problem = urlProblem(url);
      expect(problem).toBe('the URL must not carry a fragment');
      expect(problem).not.toMatch(/s3cr3t|part/);
    }
  });

  it('refuses more than 2,048 characters', () => {
    const base = 'https://hooks.example.com/?q=';
    expect(urlProblem(base + 'a'.repeat(2048 - base.length))).toBeUndefined();
    expect(urlProblem(base + 'a'.repeat(2049 - base.length))).toBe('the URL is longer than 2048 characters');
  });
});

describe('addressProblem', () => {
  const refusedV4: [string, string][] = [
    ['0.0.0.0', 'a "this network" address (0.0.0.0/8)'],
    ['0.255.1.2', 'a "this network" address (0.0.0.0/8)'],
    ['10.0.0.1', 'a private address (10.0.0.0/8)'],
    ['10.255.255.255', 'a private address (10.0.0.0/8)'],
    ['100.64.0.1', 'a shared (carrier-grade NAT) address (100.64.0.0/10)'],
    ['100.127.255.255', 'a shared (carrier-grade NAT) address (100.64.0.0/10)'],
    ['127.0.0.1', 'a loopback address (127.0.0.0/8)'],
    ['127.255.0.9', 'a loopback address (127.0.0.0/8)'],
    ['169.254.169.254', 'a link-local address (cloud metadata among them) (169.254.0.0/16)'],
    ['172.16.0.1', 'a private address (172.16.0.0/12)'],
    ['172.31.255.255', 'a private address (172.16.0.0/12)'],
    ['192.0.0.8', 'an IETF protocol assignment address (192.0.0.0/24)'],
    ['192.0.2.10', 'a documentation address (192.0.2.0/24)'],
    ['192.168.1.1', 'a private address (192.168.0.0/16)'],
    ['198.18.0.1', 'a benchmarking address (198.18.0.0/15)'],
    ['198.19.255.255', 'a benchmarking address (198.18.0.0/15)'],
    ['198.51.100.7', 'a documentation address (198.51.100.0/24)'],
    ['203.0.113.7', 'a documentation address (203.0.113.0/24)'],
    ['224.0.0.1', 'a multicast address (224.0.0.0/4)'],
    ['239.255.255.250', 'a multicast address (224.0.0.0/4)'],
    ['240.0.0.1', 'a reserved address (240.0.0.0/4)'],
    ['255.255.255.254', 'a reserved address (240.0.0.0/4)'],
    ['255.255.255.255', 'the broadcast address (255.255.255.255/32)'],
  ];
  it.each(refusedV4)('refuses IPv4 %s as %s', (address, reason) => {
    expect(addressProblem(address, {})).toBe(reason);
  });

  const refusedV6: [string, string][] = [
    ['::', 'the unspecified address (::/128)'],
    ['::1', 'a loopback address (::1/128)'],
    ['fc00::1', 'a unique local address (EC2 metadata fd00:ec2::254 among them) (fc00::/7)'],
    ['fd00:ec2::254', 'a unique local address (EC2 metadata fd00:ec2::254 among them) (fc00::/7)'],
    ['fe80::1', 'a link-local address (fe80::/10)'],
    ['fe80::1%eth0', 'a link-local address (fe80::/10)'],
    ['febf:ffff::1', 'a link-local address (fe80::/10)'],
    ['ff02::1', 'a multicast address (ff00::/8)'],
    ['2001:db8::1', 'a documentation address (2001:db8::/32)'],
    ['::ffff:127.0.0.1', 'a loopback address (127.0.0.0/8) as an IPv4-mapped address (::ffff:0:0/96, 127.0.0.1)'],
    ['::ffff:10.1.2.3', 'a private address (10.0.0.0/8) as an IPv4-mapped address (::ffff:0:0/96, 10.1.2.3)'],
    ['::ffff:a9fe:a9fe', 'a link-local address (cloud metadata among them) (169.254.0.0/16) as an IPv4-mapped address (::ffff:0:0/96, 169.254.169.254)'],
    ['64:ff9b::a9fe:a9fe', 'a link-local address (cloud metadata among them) (169.254.0.0/16) as a NAT64 address (64:ff9b::/96, 169.254.169.254)'],
    ['64:ff9b::192.168.0.1', 'a private address (192.168.0.0/16) as a NAT64 address (64:ff9b::/96, 192.168.0.1)'],
    ['::127.0.0.1', 'an address outside global unicast (outside 2000::/3)'],
    ['100::1', 'an address outside global unicast (outside 2000::/3)'],
  ];
  it.each(refusedV6)('refuses IPv6 %s as %s', (address, reason) => {
    expect(addressProblem(address, {})).toBe(reason);
  });

  it.each(['8.8.8.8', '1.1.1.1', '93.184.215.14', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2a00:1450:4001:82a::200e', '::ffff:8.8.8.8', '64:ff9b::808:808'])(
    'allows the public address %s',
    (address) => {
      expect(addressProblem(address, {})).toBeUndefined();
    },
  );

  it('refuses what is not an IP address', () => {
    expect(addressProblem('hooks.example.com', {})).toBe('not an IP address');
    expect(addressProblem('', {})).toBe('not an IP address');
  });

  it('allows loopback only with allowLoopback, and nothing else with it', () => {
    for (const address of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) {
      expect(addressProblem(address, { allowLoopback: true })).toBeUndefined();
      expect(addressProblem(address, { allowLoopback: false })).toMatch(/^a loopback address/);
    }
    expect(addressProblem('10.0.0.1', { allowLoopback: true })).toBe('a private address (10.0.0.0/8)');
    expect(addressProblem('169.254.169.254', { allowLoopback: true })).toMatch(/^a link-local address/);
    expect(addressProblem('::', { allowLoopback: true })).toBe('the unspecified address (::/128)');
  });
});

describe('checkEndpoint', () => {
  it('answers the addresses of a host resolving only to public addresses', async () => {
    await expect(checkEndpoint('https://hooks.example.com/in', PUBLIC, {})).resolves.toEqual({
      ok: true,
      addresses: ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    });
  });

  it('checks the syntax first, without asking DNS or quoting secrets', async () => {
    const resolve = resolverOf({ 'hooks.example.com': ['8.8.8.8'] });
    const plain = await checkEndpoint('http://hooks.example.com/in', resolve, {});
    expect(plain).toEqual({ ok: false, reason: 'the URL must be https' });
    const userinfo = await checkEndpoint('https://alice:s3cr3t@hooks.example.com/in?key=k3y', resolve, {});
    expect(userinfo).toEqual({ ok: false, reason: 'the URL must not carry a user name or password' });
    expect(JSON.stringify(userinfo)).not.toMatch(/alice|s3cr3t|k3y/);
    expect(resolve.asked).toEqual([]);
  });

  it('checks an IP literal host itself, in both forms, with any port', async () => {
    const resolve = resolverOf({});
    await expect(checkEndpoint('https://169.254.169.254/latest/meta-data/', resolve, {})).resolves.toEqual({
      ok: false,
      reason: 'its host is a link-local address (cloud metadata among them) (169.254.0.0/16)',
    });
    await expect(checkEndpoint('https://[::ffff:127.0.0.1]:8443/', resolve, {})).resolves.toMatchObject({ ok: false, reason: expect.stringMatching(/^its host is a loopback address/) });
    await expect(checkEndpoint('https://[fd00:ec2::254]/', resolve, {})).resolves.toMatchObject({ ok: false, reason: expect.stringMatching(/^its host is a unique local address/) });
    await expect(checkEndpoint('https://8.8.8.8:8443/in', resolve, {})).resolves.toEqual({ ok: true, addresses: ['8.8.8.8'] });
    await expect(checkEndpoint('https://[2606:4700:4700::1111]/in', resolve, {})).resolves.toEqual({ ok: true, addresses: ['2606:4700:4700::1111'] });
    expect(resolve.asked).toEqual([]);
  });

  it('sees through the other spellings of an IPv4 literal the URL parser normalizes', async () => {
    const resolve = resolverOf({});
    for (const url of ['https://2130706433/', 'https://0x7f.1/', 'https://0177.0.0.1/']) {
      await expect(checkEndpoint(url, resolve, {})).resolves.toEqual({ ok: false, reason: 'its host is a loopback address (127.0.0.0/8)' });
    }
    expect(resolve.asked).toEqual([]);
  });

  it('refuses a host resolving to one public and one private address (DNS rebinding)', async () => {
    const resolve = resolverOf({ 'rebind.example.com': ['8.8.8.8', '10.0.0.5'] });
    await expect(checkEndpoint('https://rebind.example.com/in', resolve, {})).resolves.toEqual({
      ok: false,
      reason: 'its host resolves to a private address (10.0.0.0/8)',
    });
    const mapped = resolverOf({ 'mapped.example.com': ['2606:4700:4700::1111', '::ffff:169.254.169.254'] });
    await expect(checkEndpoint('https://mapped.example.com/', mapped, {})).resolves.toMatchObject({ ok: false, reason: expect.stringMatching(/^its host resolves to a link-local address/) });
  });

  it('refuses a host that does not resolve: a resolver failure or no address', async () => {
    await expect(checkEndpoint('https://missing.example.com/', resolverOf({}), {})).resolves.toEqual({ ok: false, reason: 'its host does not resolve' });
    await expect(checkEndpoint('https://empty.example.com/', resolverOf({ 'empty.example.com': [] }), {})).resolves.toEqual({ ok: false, reason: 'its host does not resolve' });
    await expect(checkEndpoint('https://odd.example.com/', resolverOf({ 'odd.example.com': ['not-an-address'] }), {})).resolves.toEqual({
      ok: false,
      reason: 'its host resolves to something not an IP address',
    });
  });

  it('takes localhost and *.localhost as loopback without asking DNS', async () => {
    const resolve = resolverOf({ localhost: ['8.8.8.8'], 'app.localhost': ['8.8.8.8'] });
    for (const url of ['https://localhost/', 'https://LOCALHOST:3000/in', 'https://app.localhost/', 'https://localhost./']) {
      await expect(checkEndpoint(url, resolve, {})).resolves.toEqual({ ok: false, reason: 'its host is a loopback name (localhost)' });
    }
    expect(resolve.asked).toEqual([]);
  });

  it('with allowLoopback, allows 127.0.0.1, ::1 and localhost but still refuses 10.x and 169.254.x', async () => {
    const options = { allowLoopback: true };
    const resolve = resolverOf({ 'loop.example.com': ['127.0.0.1', '::1'], 'inside.example.com': ['127.0.0.1', '10.1.2.3'] });
    await expect(checkEndpoint('https://127.0.0.1:3000/in', resolve, options)).resolves.toEqual({ ok: true, addresses: ['127.0.0.1'] });
    await expect(checkEndpoint('https://[::1]:3000/in', resolve, options)).resolves.toEqual({ ok: true, addresses: ['::1'] });
    await expect(checkEndpoint('https://localhost:3000/in', resolve, options)).resolves.toEqual({ ok: true, addresses: ['127.0.0.1', '::1'] });
    await expect(checkEndpoint('https://loop.example.com/in', resolve, options)).resolves.toEqual({ ok: true, addresses: ['127.0.0.1', '::1'] });
    await expect(checkEndpoint('https://10.1.2.3/in', resolve, options)).resolves.toEqual({ ok: false, reason: 'its host is a private address (10.0.0.0/8)' });
    await expect(checkEndpoint('https://169.254.169.254/', resolve, options)).resolves.toMatchObject({ ok: false, reason: expect.stringMatching(/^its host is a link-local address/) });
    await expect(checkEndpoint('https://inside.example.com/in', resolve, options)).resolves.toEqual({ ok: false, reason: 'its host resolves to a private address (10.0.0.0/8)' });
  });
});
