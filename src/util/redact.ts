/**
 * Credentials never reach an output. Every line the CLI and the dashboard
 * command print about a target, and every error message they print, goes
 * through {@link redactCredentials}.
 */

/** A URL, from `scheme://` to the first character that cannot be in one (a quote, a bracket, white space). */
const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]*/gi;

/** A URL's scheme and userinfo: everything from `scheme://` up to the last `@` before the host. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i;

/**
 * Query parameters that carry a credential in a URL some client accepts:
 * ioredis takes every parameter as an option (`?password=`, `?username=`),
 * and token or user parameters are common elsewhere (`?token=`, `?user=`,
 * `?pass=`, `?auth=`, `?secret=`, `?access_token=`).
 */
const SECRET_PARAMETER = /^(?:user(?:name)?|pass|pwd|auth(?:orization)?|credentials?|.*(?:password|passwd|token|secret|sasl).*)$/i;

/**
 * `text` with the credentials of every URL in it replaced by `***`: the
 * password of a userinfo (`amqp://ops:***@rabbit:5672/`), a userinfo
 * without a password, which may itself be a token, whole
 * (`nats://***@nats:4222`), and the value of every query parameter that
 * names a user, password, token or secret (`redis://cache/0?password=***`).
 */
export function redactCredentials(text: string): string {
  return text.replace(URL_PATTERN, (url) => redactQuery(redactUserinfo(url)));
}

function redactUserinfo(url: string): string {
  return url.replace(USERINFO, (_, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return `${scheme}${colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`}@`;
  });
}

function redactQuery(url: string): string {
  const question = url.indexOf('?');
  if (question < 0) return url;
  const hash = url.indexOf('#', question);
  const end = hash < 0 ? url.length : hash;
  const query = url
    .slice(question + 1, end)
    .split(/([&;])/)
    .map((part) => {
      const eq = part.indexOf('=');
      if (eq < 0) return part;
      let name: string;
      try {
        name = decodeURIComponent(part.slice(0, eq).replace(/\+/g, ' '));
      } catch {
        name = part.slice(0, eq);
      }
      return SECRET_PARAMETER.test(name.trim()) ? `${part.slice(0, eq)}=***` : part;
    })
    .join('');
  return `${url.slice(0, question + 1)}${query}${url.slice(end)}`;
}
