/** Configuration for the commands (`lectern`, `npm start`): a bad variable is one line on stderr. */
import { ConfigError, loadConfig, type Config } from "../core/config.js";

/** The configuration from the environment, or null after saying on stderr which variable is wrong. */
export function loadConfigOrReport(): Config | null {
  try {
    return loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`lectern: configuration error: ${error.message}\n`);
    return null;
  }
}
