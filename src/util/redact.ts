/**
 * Credentials never reach an output. Every line the CLI and the dashboard
 * command print about a target, and every error message they print, goes
 * through {@link redactCredentials}.
 */

/** A URL's scheme and userinfo: everything from `scheme://` up to the last `@` before the host. */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#]*)@/gi;

/**
 * `text` with the password of every URL in it replaced by `***`
 * (`amqp://ops:***@rabbit:5672/`); a userinfo without a password, which may
 * itself be a token, is replaced whole (`amqp://***@rabbit/`).
 */
export function redactCredentials(text: string): string {
  return text.replace(USERINFO, (_, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return `${scheme}${colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`}@`;
  });
}
