import { isIP } from 'node:net';

/** Thrown once at start with every problem in the environment, so an operator fixes them in one go. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

export type Env = Record<string, string | undefined>;

/** pino's levels, as LOG_LEVEL takes them in both services. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Reads typed values from an environment, collecting problems instead of throwing at the first. */
export class EnvReader {
  readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  string(name: string): string | undefined;
  string(name: string, fallback: string): string;
  string(name: string, fallback?: string): string | undefined {
    const value = this.env[name]?.trim();
    return value === undefined || value === '' ? fallback : value;
  }

  int(name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
    const raw = this.string(name);
    if (raw === undefined) return fallback;
    if (!/^-?\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return Number(raw);
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.string(name);
    if (raw === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(raw)) {
      this.problems.push(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
      return fallback;
    }
    return raw as T;
  }

  /**
   * A connection URL in one of `protocols`. A problem quotes the whole value, password and query
   * hidden, and says how to write it: `host:port` alone reads as a scheme named after the host.
   */
  url(name: string, protocols: string[], fallback?: string): string | undefined {
    const raw = this.string(name) ?? fallback;
    if (raw === undefined) return undefined;
    const shown = `${name}="${redactValue(raw)}"`;
    const example = `${protocols[0]}//${redactValue(raw.replace(/^[a-z][a-z0-9+.-]*:\/\//i, ''))}`;
    const schemed = /^([a-z][a-z0-9+.-]*:)\/\//i.exec(raw);
    if (!schemed) {
      this.problems.push(`${shown} is not a URL: write ${example}`);
      return raw;
    }
    const protocol = (schemed[1] as string).toLowerCase();
    if (!protocols.includes(protocol)) {
      this.problems.push(`${shown} must start with ${protocols.map((p) => `${p}//`).join(' or ')}: write ${example}`);
      return raw;
    }
    // MongoDB URLs may list several hosts (h1:27017,h2:27017), which WHATWG URL parsing rejects.
    if (!MULTI_HOST.has(protocol)) {
      try {
        new URL(raw);
      } catch {
        this.problems.push(`${shown} is not a valid URL (a space, or a port that is not a number?)`);
      }
    } else if (!/^[a-z+]+:\/\/[^/?#]+/i.test(raw)) {
      this.problems.push(`${shown} has no host: write ${protocols[0]}//host:port`);
    }
    return raw;
  }

  /**
   * An address to listen on: an IP address or a host name. Numbers that are not an IPv4 address
   * (300.1.1.1) are neither, though a resolver may take them: checked here, not left to listen().
   */
  host(name: string, fallback: string): string {
    const raw = this.string(name, fallback);
    const numeric = /^[0-9.]+$/.test(raw);
    if (isIP(raw) === 0 && (numeric || !HOST_NAME.test(raw))) {
      this.problems.push(
        `${name} must be an IP address or a host name (0.0.0.0: every address; 127.0.0.1: this machine only), got "${raw}"`,
      );
    }
    return raw;
  }

  /**
   * Two listeners of a process on one port would fail its start (EADDRINUSE) after the first had
   * bound: refused here with every other problem. Port 0 (any free one) never clashes, nor do two
   * different addresses of the machine (each an IP, neither a wildcard).
   */
  distinctListeners(listeners: readonly ListenerSetting[]): void {
    for (const [i, a] of listeners.entries()) {
      for (const b of listeners.slice(i + 1)) {
        if (a.port === 0 || a.port !== b.port || apart(a.host, b.host)) continue;
        this.problems.push(
          `${a.portVariable} and ${b.portVariable} are both ${a.port}: give each listener its own port`,
        );
      }
    }
  }

  /**
   * The database a MongoDB URL names in its path (`mongodb://host/animal-store-staging`), else
   * `fallback`: two environments on one cluster each name their own, and a user granted rights on
   * that database only is given it. A name MongoDB refuses is a problem here, not a server error later.
   */
  mongoDatabase(name: string, url: string | undefined, fallback: string): string {
    const database = url === undefined ? undefined : mongoUrlDatabase(url);
    if (database === undefined) return fallback;
    if (database === null || !MONGO_DATABASE_NAME.test(database)) {
      this.problems.push(
        `${name} names a database MongoDB refuses: use 1 to 63 characters without / \\ . " $ or spaces, or name none for "${fallback}"`,
      );
      return fallback;
    }
    return database;
  }

  require(condition: boolean, problem: string): void {
    if (!condition) this.problems.push(problem);
  }

  done(): void {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
  }
}

/** Where one listener of a process binds, and the variable that sets its port. */
export interface ListenerSetting {
  portVariable: string;
  host: string;
  port: number;
}

/** Labels of letters, digits and inner hyphens, dot-separated, at most 253 characters. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;
const WILDCARDS = new Set(['0.0.0.0', '::']);

/** Two distinct IP addresses, neither every address: listeners on them may share a port. */
function apart(a: string, b: string): boolean {
  return a !== b && isIP(a) !== 0 && isIP(b) !== 0 && !WILDCARDS.has(a) && !WILDCARDS.has(b);
}

const MULTI_HOST = new Set(['mongodb:', 'mongodb+srv:']);

/**
 * What MongoDB takes as a database name on every platform it runs on, kept under its 64-byte limit:
 * https://www.mongodb.com/docs/manual/reference/limits/#naming-restrictions (no /\\. "$*<>:|? or null).
 */
const MONGO_DATABASE_NAME = /^[^/\\. "$*<>:|?\0]{1,63}$/;

/**
 * The database in a MongoDB connection string's path, percent-decoded: undefined when it names
 * none (`mongodb://h`, `mongodb://h/`, `mongodb://h/?replicaSet=rs0`), null when it cannot be decoded.
 */
function mongoUrlDatabase(url: string): string | null | undefined {
  const match = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*\/([^?#]*)/i.exec(url);
  const raw = match?.[1];
  if (raw === undefined || raw === '') return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

/** Strips the password and the query (which may carry secrets) from a connection URL before it is logged. */
export function redactUrl(url: string): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(([^:@/]*)(:[^@/]*)?@)?([^/?#]*)([^?#]*)/i.exec(url);
  if (!match) return '[unparseable url]';
  const [, scheme, userinfo, user, , hosts, path] = match;
  return `${scheme}${userinfo ? `${user}:***@` : ''}${hosts}${path}`;
}

/**
 * A connection string as it may be shown: the password of a `user:password@` (with or without a
 * scheme) and the query (which may carry secrets) hidden, everything else kept.
 */
function redactValue(value: string): string {
  // Greedy to the last '@': an unencoded '/', '#' or '?' in a password is what makes a URL invalid,
  // and then the whole value is quoted. (An '@' later in a path or query hides more, never less.)
  const redacted = value.replace(/^((?:[a-z][a-z0-9+.-]*:\/\/)?[^:@/]*):.*@/i, '$1:***@');
  const query = redacted.indexOf('?', redacted.lastIndexOf('@') + 1);
  return query < 0 ? redacted : `${redacted.slice(0, query)}?***`;
}

/** A MongoDB to migrate: its URL and the database the service keeps there. */
export interface MongoTarget {
  url: string;
  db: string;
}

/**
 * What `server.js migrate` reads: MONGO_URL, required (there is nothing to migrate without it),
 * and the database it names, else the service's own (`fallback`), as the service reads them.
 */
export function loadMongoTarget(env: Env, fallback: string): MongoTarget {
  const r = new EnvReader(env);
  const url = r.url('MONGO_URL', ['mongodb:', 'mongodb+srv:']);
  r.require(
    url !== undefined,
    'MONGO_URL is required to migrate: the MongoDB whose indexes and data it brings up to date',
  );
  const db = r.mongoDatabase('MONGO_URL', url, fallback);
  r.done();
  return { url: url as string, db };
}
