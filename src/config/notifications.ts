/**
 * `notifications:` of the proxy config → NotificationSettings: the webhook's URL and HMAC secret
 * read (env, file or inline) and checked at start-up, durations parsed, bounds kept.
 */
import { UserError } from '../errors.js';
import { parseTimerDuration } from './durations.js';
import type { FileConfig, SecretConfig } from './schema.js';

export type NotificationEvent = 'ciba' | 'device' | 'per_call';

export interface WebhookSettings {
  /** A secret in its own right (chat webhook URLs often are): log only its origin. */
  readonly url: string;
  /** HMAC-SHA256 key. Never logged or sent. */
  readonly secret: string;
  readonly events: ReadonlySet<NotificationEvent>;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  readonly retryBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly maxQueue: number;
}

export interface NotificationSettings {
  readonly webhook?: WebhookSettings;
}

/** As for the proxy's other secrets: shorter keys are guessable. */
const MIN_SECRET_LENGTH = 16;

export function resolveNotifications(
  config: FileConfig['notifications'],
  where: string,
  readSecret: (value: SecretConfig, at: string) => string,
): NotificationSettings {
  const w = config.webhook;
  if (!w) return Object.freeze({});
  const at = `${where}: notifications.webhook`;
  const url = readSecret(w.url, `${at}.url`).trim();
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UserError(`${at}.url: not a URL`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new UserError(`${at}.url: must be an http(s) URL`);
  }
  const secret = readSecret(w.secret, `${at}.secret`);
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new UserError(
      `${at}.secret: must be at least ${MIN_SECRET_LENGTH} characters (e.g. openssl rand -hex 32)`,
    );
  }
  const ms = (value: FileConfig['execution']['timeout'], key: string): number =>
    parseTimerDuration(value, `${at}.${key}`, 0);
  const timeoutMs = ms(w.timeout, 'timeout');
  const retryBackoffMs = ms(w.retry_backoff, 'retry_backoff');
  const maxBackoffMs = ms(w.max_backoff, 'max_backoff');
  if (timeoutMs < 100 || timeoutMs > 60_000)
    throw new UserError(`${at}.timeout: must be between 100ms and 60s`);
  if (retryBackoffMs < 10) throw new UserError(`${at}.retry_backoff: must be at least 10ms`);
  if (maxBackoffMs < retryBackoffMs)
    throw new UserError(`${at}.max_backoff: must not be shorter than retry_backoff`);
  return Object.freeze({
    webhook: Object.freeze({
      url: parsed.href,
      secret,
      events: new Set(w.events),
      timeoutMs,
      maxAttempts: w.max_attempts,
      retryBackoffMs,
      maxBackoffMs,
      maxQueue: w.max_queue,
    }),
  });
}
