/** `check`: validates what serve would load, without opening the database or a port. */
import { checkSettings } from '../check.js';
import { resolveSettings, type CliOverrides } from '../config/settings.js';
import { UserError } from '../errors.js';
import { userErrorLine, type CliOutput } from './output.js';

/** Exit 0 with what was checked, or 1 with every problem (a failed check is its answer, not a usage mistake). */
export async function check(cli: CliOverrides, io: CliOutput): Promise<number> {
  try {
    const report = await checkSettings(resolveSettings(cli));
    for (const w of report.warnings) io.err(`warning: ${w}\n`);
    io.out(
      `ok: ${report.capabilities} capabilities from ${report.apis} API${report.apis === 1 ? '' : 's'}, policy ${report.policy ?? '(built-in)'}\n`,
    );
    return 0;
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    io.err(userErrorLine(err.message));
    return 1;
  }
}
