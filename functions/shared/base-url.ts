/**
 * The rule for the provider base address, shared by the run-time configuration and the CDK context
 * validation: `https://` only; plain `http://` is accepted for loopback hosts (local runs and tests).
 * Returns the address without a trailing slash, or throws an Error whose message says what is wrong
 * (the caller prefixes the key's name).
 */
export function normalizeBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`"${value}" is not an absolute URL (expected https://host[/path])`);
  }
  if (url.username || url.password) {
    throw new Error('must not carry user name or password');
  }
  if (url.search || url.hash || value.includes('?') || value.includes('#')) {
    throw new Error('must not carry a query string or fragment');
  }
  if (url.protocol === 'http:') {
    if (!isLoopbackHost(url.hostname)) {
      throw new Error(`plain http:// is accepted only for loopback hosts; use https:// for ${url.hostname}`);
    }
  } else if (url.protocol !== 'https:') {
    throw new Error(`protocol ${url.protocol} is not supported; use https://`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === 'localhost' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}
