import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What `npm run dev` keeps between restarts, so scripts holding the token and key keep working. */
export interface DevState {
  admin_token: string;
  demo_api_key: string;
}

const FILE = 'state.json';

export function readDevState(dir: string): Partial<DevState> {
  try {
    const parsed: unknown = JSON.parse(readFileSync(join(dir, FILE), 'utf8'));
    return parsed && typeof parsed === 'object' ? parsed : {};
  } catch {
    return {}; // first start, or a file someone broke: new values are made and written
  }
}

/** Secrets, readable by the owner only. */
export function writeDevState(dir: string, state: DevState): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, FILE), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}
