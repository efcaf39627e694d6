/**
 * Databases of the scale benchmark's sizes (issue 17), written straight into SQLite so that five
 * million rows take seconds rather than the hours the protocol would need. The schema comes from
 * the build under test (its own migrations, run by opening its store once), so the same seed
 * serves a build before and after a schema change; only columns every migrated schema has are
 * written, the rest take their defaults.
 *
 * The rows look like a deployment that has run for a while: hosts linked to users, ten agents per
 * host each with its approved registration, three grants per agent, and executions spread over
 * every agent. One agent has a single activity row, written first (the oldest), which is what an
 * operator looking up a quiet agent asks for.
 */
import Database from 'better-sqlite3';

export interface SeedSize {
  readonly hosts: number;
  readonly agentsPerHost: number;
  readonly grantsPerAgent: number;
  readonly activity: number;
}

/** The agent whose whole history is one activity row. */
export const QUIET_AGENT = 'agt_seed_quiet';

const CAPABILITIES = ['list_pets', 'get_pet', 'create_pet'];
const DAY = 86_400_000;

/** Deterministic pseudo-random numbers (mulberry32), so every run seeds the same rows. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Adds hosts, agents, their registration approvals and grants to a migrated database file.
 * Times lie in the 30 days before `now`.
 */
export function seedPrincipals(file: string, size: SeedSize, now: number): void {
  const db = new Database(file);
  try {
    fast(db);
    const host = db.prepare(
      `INSERT INTO hosts (id, thumbprint, public_jwk, name, user_id, default_capabilities, status,
         activated_at, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, '[]', 'active', ?, ?, ?)`,
    );
    const agent = db.prepare(
      `INSERT INTO agents (id, host_id, user_id, name, public_jwk, key_thumbprint, mode, status,
         activated_at, created_at, updated_at)
       VALUES (?, ?, NULL, ?, ?, ?, 'delegated', ?, ?, ?, ?)`,
    );
    const approval = db.prepare(
      `INSERT INTO approvals (id, kind, agent_id, host_id, user_code, method, capabilities, status,
         created_at, expires_at, decided_at, decided_by)
       VALUES (?, 'registration', ?, ?, ?, 'device_authorization', ?, 'approved', ?, ?, ?, ?)`,
    );
    const grant = db.prepare(
      `INSERT INTO grants (id, agent_id, capability, status, granted_by, approval_id, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const rand = random(17);
    const requested = JSON.stringify(CAPABILITIES.map((name) => ({ name })));
    db.transaction(() => {
      let n = 0;
      for (let h = 0; h < size.hosts; h++) {
        const hostId = `hst_seed_${h}`;
        const user = `user-${h % 2_000}@example.com`;
        const hostAt = now - 30 * DAY + Math.floor((h / size.hosts) * 29 * DAY);
        host.run(hostId, `tp_host_${h}`, jwk(`h${h}`), `seed host ${h}`, user, hostAt, hostAt, hostAt);
        for (let a = 0; a < size.agentsPerHost; a++, n++) {
          const agentId = h === 0 && a === 0 ? QUIET_AGENT : `agt_seed_${n}`;
          const at = hostAt + a * 60_000;
          // Most agents are live; some were revoked or expired, as in any deployment that has run.
          const roll = rand();
          const status = roll < 0.85 ? 'active' : roll < 0.95 ? 'expired' : 'revoked';
          agent.run(agentId, hostId, `seed agent ${n}`, jwk(`a${n}`), `tp_agent_${n}`, status, at, at, at);
          const approvalId = `apr_seed_${n}`;
          approval.run(
            approvalId,
            agentId,
            hostId,
            `SEED${n.toString(36).toUpperCase()}`,
            requested,
            at,
            at + 600_000,
            at + 30_000,
            user,
          );
          for (let g = 0; g < size.grantsPerAgent; g++) {
            const capability = CAPABILITIES[g % CAPABILITIES.length] as string;
            const grantStatus = status === 'revoked' ? 'revoked' : 'active';
            grant.run(`grt_seed_${n}_${g}`, agentId, capability, grantStatus, user, approvalId, at, at);
          }
        }
      }
    })();
  } finally {
    db.close();
  }
}

/**
 * Appends `size.activity` execution records over the seeded agents (the quiet agent's single
 * row first), in transactions of 100,000 rows.
 */
export function seedActivity(file: string, size: SeedSize, now: number): void {
  const agents = size.hosts * size.agentsPerHost;
  const db = new Database(file);
  try {
    fast(db);
    const insert = db.prepare(
      `INSERT INTO activity (at, type, agent_id, host_id, user_id, capability, outcome, detail, jti,
         latency_ms, upstream_status)
       VALUES (?, 'execution', ?, ?, ?, ?, ?, NULL, ?, ?, 200)`,
    );
    const start = now - 30 * DAY;
    const step = (30 * DAY) / size.activity;
    insert.run(
      start,
      QUIET_AGENT,
      'hst_seed_0',
      'user-0@example.com',
      'get_pet',
      'success',
      'jti-quiet',
      3.2,
    );
    const rand = random(42);
    const batch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        // Never the quiet agent (index 0): its one row is the one written above.
        const n = 1 + Math.floor(rand() * (agents - 1));
        const h = Math.floor(n / size.agentsPerHost);
        insert.run(
          Math.floor(start + i * step),
          `agt_seed_${n}`,
          `hst_seed_${h}`,
          `user-${h % 2_000}@example.com`,
          CAPABILITIES[i % CAPABILITIES.length],
          rand() < 0.97 ? 'success' : 'denied',
          `jti-${i}`,
          1 + rand() * 20,
        );
      }
    });
    for (let i = 1; i < size.activity; i += 100_000) batch(i, Math.min(size.activity, i + 100_000));
  } finally {
    db.close();
  }
}

/** Seeding only: no journal, no fsync (the proxy sets WAL and synchronous=FULL when it opens the file). */
function fast(db: Database.Database): void {
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');
}

function jwk(seed: string): string {
  return JSON.stringify({ kty: 'OKP', crv: 'Ed25519', x: `seed-${seed}`.padEnd(43, 'A').slice(0, 43) });
}
