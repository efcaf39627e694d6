/**
 * node:util parseArgs (strict) refuses `--passkey-id -Xb3…`: it cannot tell a value that starts
 * with a dash from a forgotten one. Passkey IDs are base64url, so one in 32 starts with '-', and
 * the ID `admin passkeys list` printed would not paste back. Here a token after a string option is
 * its value unless it names an option of the command; then parseArgs still reports the forgotten
 * value.
 */
interface OptionShape {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
}

/** `argv` with each `--name VALUE` whose VALUE starts with '-' written as `--name=VALUE`. */
export function attachDashValues(
  argv: readonly string[],
  options: Readonly<Record<string, OptionShape>>,
): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    const value = argv[i + 1];
    if (token === '--') return [...out, ...argv.slice(i)];
    if (
      value !== undefined &&
      value.startsWith('-') &&
      value !== '--' &&
      stringOption(token, options) &&
      !namesOption(value, options)
    ) {
      out.push(`${token}=${value}`);
      i++;
    } else {
      out.push(token);
    }
  }
  return out;
}

function stringOption(token: string, options: Readonly<Record<string, OptionShape>>): boolean {
  return token.startsWith('--') && !token.includes('=') && options[token.slice(2)]?.type === 'string';
}

function namesOption(token: string, options: Readonly<Record<string, OptionShape>>): boolean {
  if (token.startsWith('--')) return Object.hasOwn(options, token.slice(2).split('=', 1)[0] ?? '');
  const short = token.slice(1, 2);
  return Object.values(options).some((o) => o.short === short);
}
